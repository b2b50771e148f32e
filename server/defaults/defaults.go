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
	// reconciler counts a provisioning sandbox stale after it, plus a margin.
	ProvisionTimeout = 120 * time.Second

	// MaxQueued bounds the sandboxes waiting for a pool, all projects together
	// (scheduler.maxQueued), so a flood of creates is refused instead of growing the
	// queue without limit.
	MaxQueued = 10000

	// EventsPerSandbox is how many events of one sandbox are kept, the newest
	// (events.keepPerSandbox).
	EventsPerSandbox = 1000
	// EventsAfterTerminal is how long a sandbox's events outlive its end
	// (events.keepAfterTerminalSeconds): a week.
	EventsAfterTerminal = 7 * 24 * time.Hour
)
