# A project is imported by org/name (a bare name means the default org).
terraform import differently_project.ci default/ci
