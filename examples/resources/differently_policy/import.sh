# There is one policy: the ID is ignored.
terraform import differently_policy.this policy
