// Package defaults holds the daemon's defaults that more than one package applies:
// the config file fills them in (config.Default), and the packages whose options
// they are fall back to them when built without a config (tests, tools, embedders).
// Keeping each in one place means a changed default cannot leave one of its users
// behind. The package imports nothing of this module, so any package may use it.
package defaults

import "time"

const (
	// Port is the API's port when none is given.
	Port = "8700"
	// Listen is where the daemon listens unless told otherwise: loopback only, so a
	// daemon started without thought is not exposed.
	Listen = "127.0.0.1:" + Port

	// ProvisionTimeout bounds each Create (scheduler.provisionTimeoutSeconds); the
	// reconciler counts a provisioning sandbox stale after it, plus ProvisionMargin.
	ProvisionTimeout = 120 * time.Second
	// ProvisionMargin is how much longer than ProvisionTimeout the scheduler's claim
	// on a provisioning sandbox lasts, its Create being cut off that long before the
	// claim ends: time for an adapter to abort a half-made instance, and for clock
	// skew between replicas (docs/pools.md, adoption). The breaker's trial lease and
	// the reconciler's adoption of an unclaimed sandbox wait as long, so that none of
	// them acts while a Create may still be in flight.
	ProvisionMargin = 10 * time.Second
	// MaxAttempts is how many counted failures a sandbox gets before it fails
	// (scheduler.maxAttempts): an outage leaves room to fail over to other pools, and
	// a sandbox no pool can start still fails after a few backoffs.
	MaxAttempts = 3
	// TerminateTimeout bounds each Delete (scheduler.terminateTimeoutSeconds), so
	// that a backend that hangs cannot hold a deletion's claim for good.
	TerminateTimeout = 60 * time.Second
	// MaxStarting bounds the Creates in flight per pool on one replica for pools that
	// set no maxStarting (scheduler.defaultMaxStarting), so that a burst of creates
	// reaches a backend a few at a time.
	MaxStarting = 8

	// ReconcileInterval is how often the leading replica compares the database with
	// every pool's backend (scheduler.reconcileIntervalSeconds): a lost instance is
	// found within a minute, while every pool is listed only twice a minute. A
	// crashed leader is replaced within three intervals.
	ReconcileInterval = 30 * time.Second
	// ReconcilePassesKept is how many reconcile passes the database keeps, the
	// newest (scheduler.reconcilePassesKept): at the default interval, the last
	// hundred minutes of the leader's passes.
	ReconcilePassesKept = 200

	// MaxQueued bounds the sandboxes waiting for a pool, all projects together
	// (scheduler.maxQueued), so a flood of creates is refused instead of growing the
	// queue without limit.
	MaxQueued = 10000

	// MaxTransfers bounds the large file transfers in flight on one replica
	// (files.maxTransfers), MaxProjectTransfers those of one project
	// (files.maxProjectTransfers), so that one project cannot take every slot.
	MaxTransfers        = 8
	MaxProjectTransfers = 4
	// LargeTransferBytes is the size above which a transfer counts against those
	// bounds (files.largeTransferBytes): 1 MiB, so that small files never wait for
	// a slot.
	LargeTransferBytes = 1 << 20

	// EventsPerSandbox is how many events of one sandbox are kept, the newest
	// (events.keepPerSandbox).
	EventsPerSandbox = 1000
	// EventsAfterTerminal is how long a sandbox's events outlive its end
	// (events.keepAfterTerminalSeconds): a week.
	EventsAfterTerminal = 7 * 24 * time.Hour
)
