package httpapi

// NulField is nulField, for the external tests.
var NulField = nulField
