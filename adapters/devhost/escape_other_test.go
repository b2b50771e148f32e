//go:build !linux

package devhost

func cleanupCgroups(*Adapter) {}
