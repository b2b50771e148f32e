package sqlite

import "database/sql"

// DB exposes the write connection to the package's tests.
func DB(s *Store) *sql.DB { return s.write }

// SelectWarmSQL is the statement a claim picks its warm sandbox with.
const SelectWarmSQL = selectWarmSQL

// SelectByKeySQL is the statement that finds the sandbox holding an idempotency key.
const SelectByKeySQL = selectByKeySQL
