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

// List is DB.List.
func (c *Client) List(ctx context.Context, tx *participant.Tx, prefix string) ([]Entry, error) {
	resp, err := c.c.List(ctx, &djinnpb.KVListRequest{Prefix: prefix, Txn: TxToProto(tx)})
	if err != nil {
		return nil, kinded(err)
	}
	out := make([]Entry, len(resp.GetEntries()))
	for i, e := range resp.GetEntries() {
		out[i] = Entry{Key: e.GetKey(), Value: e.GetValue()}
	}
	return out, nil
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
