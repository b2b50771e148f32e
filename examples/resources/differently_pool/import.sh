# A pool is imported by its name.
terraform import differently_pool.ci ci-fake
