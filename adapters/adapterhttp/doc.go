// Package adapterhttp carries the execution-adapter contract over HTTP, so an adapter
// can run in its own process, on its own host, in any language.
//
// Handler serves any adapters.ExecutionAdapter; Client consumes such a server and is
// itself an ExecutionAdapter implementing every optional interface. The control
// plane's remote pools wrap a Client.
//
// # Protocol, version 1
//
// Every route lives under BasePath (/adapter/v1). Request and response bodies are JSON
// in the shapes of packages adapters and api, except file content, which is raw bytes
// (application/octet-stream, at most api.MaxFileBytes). Request JSON is limited to
// api.MaxJSONBodyBytes and must not carry unknown fields.
//
//	GET    /info                              {"info": Info, "capabilities": Capabilities, "ttlRenewal": bool}
//	GET    /capacity                          Capacity
//	GET    /health                            {"status":"ok"}, or an error (normally 503)
//	POST   /instances                         CreateRequest -> Instance
//	GET    /instances?installation=ID         [Instance] ([] when empty)
//	GET    /instances/{ref}                   Instance
//	DELETE /instances/{ref}                   204
//	POST   /instances/{ref}/exec              ExecRequest -> ExecResult
//	POST   /instances/{ref}/exec?stream=1     ExecRequest -> NDJSON of ExecEvent
//	GET    /instances/{ref}/files?path=P      [FileInfo]
//	GET    /instances/{ref}/files/content?path=P   raw bytes
//	PUT    /instances/{ref}/files/content?path=P   raw bytes -> 204
//	POST   /instances/{ref}/stop|start|pause|resume -> 204
//	POST   /instances/{ref}/snapshots         {"kind":"disk"|"memory"} -> Snapshot
//	DELETE /snapshots/{ref}                   204
//	POST   /instances/{ref}/ports             {"port":N} -> {"url":"..."}
//	POST   /instances/{ref}/ttl               {"ttlSeconds":N} -> 204
//
// Refs are opaque and path-escaped, so they may contain slashes or any other
// character; only the refs "." and ".." cannot be routed.
//
// Every response, errors included, carries the header Differently-Adapter-Protocol: 1,
// and /info repeats the version in info.protocol. The client refuses to talk to a
// server that does not send the version it speaks: a breaking change bumps the number.
//
// When the server has a token, every route, /info and /health included, requires
// Authorization: Bearer <token>; anything else is 401 unauthenticated.
//
// Errors are the envelope {"error": {"code", "message", "details"}} served with the
// status of api.Code.HTTPStatus. The code is what the control plane reacts to (retry,
// back off, mark the pool unhealthy, fail the sandbox), so a plugin must choose it as
// the adapter specification's error table says. An optional route the adapter cannot
// serve, because it lacks the interface or does not declare the feature, is 501
// unsupported_operation with details.operation.
//
// # TTL renewal
//
// An adapter whose backend keeps its own expiry for an instance implements
// adapters.TTLRenewer, which backs no feature name. A plugin declares it in /info as
// "ttlRenewal": true (omitted means false) and serves POST /instances/{ref}/ttl with
// {"ttlSeconds": N}: N is required and not negative, 0 removes the expiry. Handler
// declares and serves it exactly when the adapter implements TTLRenewer, and answers
// 501 otherwise. Client.RenewTTL calls the route only when the plugin's last /info
// declared it; otherwise the plugin has no expiry to move, and RenewTTL succeeds
// without a request.
//
// # Streaming
//
// POST /instances/{ref}/exec?stream=1 answers application/x-ndjson, one api.ExecEvent
// per line, flushed as produced, and ends with exactly one final event:
//
//	{"stream":"stdout","data":"building...\n"}
//	{"stream":"stderr","data":"warning: ...\n"}
//	{"exitCode":0}
//
// A failure after the 200 status is sent can only be reported in the body, as a final
// {"error":"message"} line; it loses its code, and the client reports it as
// provider_unavailable. Handler therefore sends the status only with the first event,
// so a failure before any output (not_found, invalid_state) keeps its code. Lines are
// at most api.MaxStreamLineBytes; Handler splits large output to stay under it. A
// stream that ends without a final event is an error. Lines after the final event are
// ignored. Data is an ordinary JSON string, read with any valid escaping; Handler
// writes it as encoding/json does without HTML escaping ('<', '>' and '&' as they are),
// each byte that is not UTF-8 becoming U+FFFD.
//
// # Writing a plugin
//
// In Go, implement adapters.ExecutionAdapter and the optional interfaces you can back,
// declare their features, and serve Handler(adapter, token) over TLS. Handler does the
// routing, authentication, protocol header, limits, NDJSON framing and feature
// filtering. In another language, implement the routes above; the minimum useful set
// is info, capacity, health, the instance routes and exec. Declare only the features
// whose routes you serve and answer 501 unsupported_operation for the rest.
package adapterhttp
