# A sandbox is imported by its ID. env, env_wo, env_wo_version, init_commands and
# timeouts are not read back.
terraform import differently_sandbox.ci sbx_01JD6Y4W3ZP2Q8Y5V0T7X9K3MN
