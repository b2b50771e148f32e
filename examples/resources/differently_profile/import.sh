# A profile is imported by its name.
terraform import differently_profile.ci_runner ci-runner
