package httpapi

import (
	"context"
	"sync"
	"time"

	"github.com/different-ai/differently/server/store"
)

// cacheTTL bounds how long a cached token or policy is used without reading it
// again. The change feed drops entries as soon as a token is deleted or the policy
// written, on any replica; the bound covers the moment the feed itself is down,
// before its resync.
const cacheTTL = 10 * time.Second

// maxCachedTokens bounds the token cache; past it the cache starts afresh. Only
// tokens that authenticated are cached, so its size is the number of tokens in use.
const maxCachedTokens = 10000

// caches spares every request a token lookup and every create a policy read.
type caches struct {
	mu     sync.Mutex
	tokens map[string]cachedToken // by hash
	policy *cachedPolicy
	// gen counts invalidations. A value read from the store is cached only if no
	// invalidation came while it was read: the read may predate the change.
	gen uint64
}

type cachedToken struct {
	tok store.Token
	at  time.Time
}

type cachedPolicy struct {
	p  store.Policy
	at time.Time
}

// onChange drops what a change made stale.
func (c *caches) onChange(ch store.Change) {
	switch ch.Kind {
	case store.ChangeToken:
		c.forgetToken(ch.ID)
	case store.ChangePolicy:
		c.forgetPolicy()
	case store.ChangeResync:
		c.mu.Lock()
		c.tokens, c.policy = nil, nil
		c.gen++
		c.mu.Unlock()
	}
}

func (c *caches) forgetToken(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for h, e := range c.tokens {
		if e.tok.ID == id {
			delete(c.tokens, h)
		}
	}
}

// forgetProject drops the cached tokens of one project, whose deletion revoked them.
func (c *caches) forgetProject(org, project string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for h, e := range c.tokens {
		tokOrg := e.tok.Org
		if tokOrg == "" {
			tokOrg = store.TokenDefaultOrg
		}
		if e.tok.Scope == store.ScopeProject && tokOrg == org && e.tok.Project == project {
			delete(c.tokens, h)
		}
	}
}

func (c *caches) forgetPolicy() {
	c.mu.Lock()
	c.policy = nil
	c.gen++
	c.mu.Unlock()
}

// tokenByHash is the store's TokenByHash behind the cache.
func (s *Server) tokenByHash(ctx context.Context, hash []byte) (store.Token, error) {
	now := s.now()
	c := &s.cache
	key := string(hash)
	c.mu.Lock()
	e, ok := c.tokens[key]
	gen := c.gen
	c.mu.Unlock()
	if ok && fresh(e.at, now) {
		return e.tok, nil
	}
	tok, err := s.st.TokenByHash(ctx, hash)
	if err != nil {
		return tok, err
	}
	c.mu.Lock()
	if c.gen == gen {
		if c.tokens == nil || len(c.tokens) >= maxCachedTokens {
			c.tokens = map[string]cachedToken{}
		}
		c.tokens[key] = cachedToken{tok: tok, at: now}
	}
	c.mu.Unlock()
	return tok, nil
}

// policy is the store's GetPolicy behind the cache. Callers must not change the
// maps of the returned policy.
func (s *Server) policy(ctx context.Context) (store.Policy, error) {
	now := s.now()
	c := &s.cache
	c.mu.Lock()
	e, gen := c.policy, c.gen
	c.mu.Unlock()
	if e != nil && fresh(e.at, now) {
		return e.p, nil
	}
	p, err := s.st.GetPolicy(ctx)
	if err != nil {
		return p, err
	}
	c.mu.Lock()
	if c.gen == gen {
		c.policy = &cachedPolicy{p: p, at: now}
	}
	c.mu.Unlock()
	return p, nil
}

// fresh says whether an entry cached at at may still be used at now; a clock that
// went backwards makes it stale too.
func fresh(at, now time.Time) bool {
	age := now.Sub(at)
	return age >= 0 && age < cacheTTL
}
