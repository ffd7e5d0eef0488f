package kv

import (
	"context"
	"errors"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Client calls a remote DB's KeyValue service with the DB's own Go
// signatures. Errors are djinn errors of the server's kinds.
type Client struct {
	c djinnpb.KeyValueClient
}

// NewClient returns a client over conn (a connection from a client.Pool or
// client.Client, usually).
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{c: djinnpb.NewKeyValueClient(conn)}
}

// Put is DB.Put.
func (c *Client) Put(ctx context.Context, tx *participant.Tx, key string, value []byte) error {
	_, err := c.c.Put(ctx, &djinnpb.KVPutRequest{Key: key, Value: value, Txn: TxToProto(tx)})
	return kinded(err)
}

// Get is DB.Get.
func (c *Client) Get(ctx context.Context, tx *participant.Tx, key string) ([]byte, bool, error) {
	resp, err := c.c.Get(ctx, &djinnpb.KVGetRequest{Key: key, Txn: TxToProto(tx)})
	if err != nil {
		return nil, false, kinded(err)
	}
	return resp.GetValue(), resp.GetFound(), nil
}

// Delete is DB.Delete.
func (c *Client) Delete(ctx context.Context, tx *participant.Tx, key string) (bool, error) {
	resp, err := c.c.Delete(ctx, &djinnpb.KVDeleteRequest{Key: key, Txn: TxToProto(tx)})
	if err != nil {
		return false, kinded(err)
	}
	return resp.GetFound(), nil
}

// List is DB.List. The server answers a listing in pages that each fit
// what a client receives by default; List asks for one after another and
// returns every entry. Under tx the pages are one view, the
// transaction's (its read lock on the prefix holds from the first page
// on). Without a transaction each page reads the committed data as it is
// then: a key written or deleted while a long listing is read may be
// listed or not, but no key is listed twice and the entries stay in key
// order.
func (c *Client) List(ctx context.Context, tx *participant.Tx, prefix string) ([]Entry, error) {
	req := &djinnpb.KVListRequest{Prefix: prefix, Txn: TxToProto(tx), Max: MaxPageEntries}
	var out []Entry
	for {
		resp, err := c.c.List(ctx, req)
		if err != nil {
			return nil, kinded(err)
		}
		for _, e := range resp.GetEntries() {
			out = append(out, Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		next := resp.GetNext()
		if next == "" {
			if out == nil {
				out = []Entry{}
			}
			return out, nil
		}
		if next <= req.GetAfter() || len(resp.GetEntries()) == 0 {
			return nil, djinn.Errorf(djinn.Internal, "key/value store: a page of prefix %q after %q named next %q, which does not go on past it; the server is at fault", prefix, req.GetAfter(), next)
		}
		req.After = next
	}
}

// kinded gives a gRPC error its djinn kind when the connection did not.
func kinded(err error) error {
	if err == nil {
		return nil
	}
	var de *djinn.Error
	var k djinn.Kind
	if errors.As(err, &de) || errors.As(err, &k) {
		return err
	}
	return grpcerr.FromStatus(err)
}
