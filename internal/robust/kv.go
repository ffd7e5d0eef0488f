package robust

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The key/value workload: each member's key/value participant is a store
// of its own (not replicated), and each principal's keys are its own
// there, so its history is a register per member, principal and key,
// written and read by several workers through the member's client proxy,
// across kills, restarts and cut connections.

type kvInput struct {
	Node  int
	As    Principal // the caller: its keys are its own
	Key   string
	Put   bool
	Value string // for Put
}

type kvOutput struct {
	Value   string // "" when not found: written values are never empty
	Unknown bool   // a Put whose outcome is unknown
}

// KVModel is a register per member, principal and key; the absent key
// reads "".
var KVModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			in := op.Input.(kvInput)
			k := fmt.Sprint(in.Node, "/", in.As, "/", in.Key)
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in, out := input.(kvInput), output.(kvOutput)
		if in.Put {
			return true, in.Value
		}
		return out.Value == state.(string), state
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(kvInput), output.(kvOutput)
		if in.Put {
			return fmt.Sprintf("put(%d/%d/%s, %q)", in.Node, in.As, in.Key, in.Value)
		}
		return fmt.Sprintf("get(%d/%d/%s) -> %q", in.Node, in.As, in.Key, out.Value)
	},
}

// kvWorker writes and reads random keys of random running members until
// ctx ends.
func (r *Run) kvWorker(ctx context.Context, id int, rng *rand.Rand) {
	for seq := 0; ctx.Err() == nil; seq++ {
		node := rng.IntN(len(r.c.Nodes))
		n := r.c.Nodes[node]
		if !n.Up() {
			r.pause(ctx, 20*time.Millisecond)
			continue
		}
		in := kvInput{Node: node, As: principalOf(id), Key: fmt.Sprintf("r%d/k%d", r.seed, rng.IntN(8)), Put: rng.IntN(2) == 0}
		kv := djinnpb.NewKeyValueClient(n.Conn(in.As))
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		call := r.clock.Now()
		var out kvOutput
		var err error
		if in.Put {
			in.Value = fmt.Sprintf("w%d-%d", id, seq)
			_, err = kv.Put(actx, &djinnpb.KVPutRequest{Key: in.Key, Value: []byte(in.Value)})
		} else {
			var got *djinnpb.KVGetResponse
			got, err = kv.Get(actx, &djinnpb.KVGetRequest{Key: in.Key})
			if err == nil && got.Found {
				out.Value = string(got.Value)
			}
		}
		cancel()
		ret := r.clock.Now()
		switch {
		case err == nil:
			r.kv.Add(porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
		case in.Put:
			// Refused or lost: it may still have been written.
			r.kv.Add(porcupine.Operation{ClientId: id, Input: in, Call: call, Output: kvOutput{Unknown: true}, Return: never})
			r.count("kv-unknown")
		}
		r.pause(ctx, time.Duration(5+rng.IntN(20))*time.Millisecond)
	}
}
