package main

import (
	"context"

	"github.com/djinn-go/djinn/client"
)

// listResourceIDs lists the ids of the caller's resources of kind at c's
// server, as "ID\tdescription".
func (g *globals) listResourceIDs(ctx context.Context, c *client.Client, kind string) ([]string, error) {
	return nil, nil
}
