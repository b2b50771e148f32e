package postgres

import "context"

// PreparedPlan is one row of pg_prepared_statements: how often the statement ran
// on a plan made for its parameters (custom) and on its generic plan.
type PreparedPlan struct {
	Statement            string
	GenericPlans, Custom int64
}

// PreparedPlans lists the statements prepared on one of the pool's connections;
// a test that opens the store with pool_max_conns=1 sees every statement it ran.
func (s *Store) PreparedPlans(ctx context.Context) ([]PreparedPlan, error) {
	rows, err := s.pool.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []PreparedPlan
	for rows.Next() {
		var p PreparedPlan
		if err := rows.Scan(&p.Statement, &p.GenericPlans, &p.Custom); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// HookCreates calls queued with the number of creates waiting whenever one queues
// for a shared transaction, and sent with the size of each batch before it is sent.
// queued runs under the queue's lock: it must not call the store.
func (s *Store) HookCreates(queued, sent func(n int)) {
	s.creates.mu.Lock()
	defer s.creates.mu.Unlock()
	s.creates.queued, s.creates.sent = queued, sent
}

// HookReads calls queued with the number of reads waiting whenever one queues for
// a shared statement, and sent with the size of each batch before it is sent.
// queued runs under the queue's lock: it must not call the store.
func (s *Store) HookReads(queued, sent func(n int)) {
	s.reads.mu.Lock()
	defer s.reads.mu.Unlock()
	s.reads.queued, s.reads.sent = queued, sent
}
