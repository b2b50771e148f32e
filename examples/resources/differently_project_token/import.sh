# A project token is imported by its ID; the secret cannot be imported.
terraform import differently_project_token.ci tok_01JD6Y4W3ZP2Q8Y5V0T7X9K3MN
