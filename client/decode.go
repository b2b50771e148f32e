package client

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// maxJSONAnswer bounds a JSON answer the client will buffer. Answers are pages of
// sandboxes or pools, far below it; the bound only stops a runaway body.
const maxJSONAnswer = 64 << 20

// decode turns a raw call's outcome into a typed value: transport failures are
// wrapped, non-2xx answers become *APIError, and the body is always closed.
func decode[T any](resp *http.Response, err error) (*T, error) {
	if err != nil {
		return nil, transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, newAPIError(resp)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONAnswer+1))
	if err != nil {
		return nil, transportError(err)
	}
	if len(body) > maxJSONAnswer {
		return nil, fmt.Errorf("differently: %s %s: answer is over %d bytes", resp.Request.Method, resp.Request.URL.Path, maxJSONAnswer)
	}
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("differently: %s %s: decoding the answer: %w", resp.Request.Method, resp.Request.URL.Path, err)
	}
	return &v, nil
}

// expectOK is decode for calls whose answer body does not matter.
func expectOK(resp *http.Response, err error) error {
	if err != nil {
		return transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return newAPIError(resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxJSONAnswer))
	return nil
}

// expectDeleted is expectOK for a DELETE the daemon does not repeat (every one but a
// sandbox's): a 404 answering the client's own replay after a lost answer is the
// first attempt's success, which removed the thing now not found.
func expectDeleted(resp *http.Response, err error) error {
	if err == nil && resp.StatusCode == http.StatusNotFound && resp.Request != nil && replayed(resp.Request) {
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	return expectOK(resp, err)
}

func ptr[T any](v T) *T { return &v }
