package server_test

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/server"
)

// capture is a connection that passes every call on but the first of
// method, whose request it keeps and does not make.
type capture struct {
	grpc.ClientConnInterface
	method string
	req    proto.Message
}

var errCaptured = errors.New("captured")

func (c *capture) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if method == c.method && c.req == nil {
		c.req = proto.Clone(args.(proto.Message))
		return errCaptured
	}
	return c.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
}

// mutations returns copies of req, each with one field (at any depth up
// to 3) set to a value at the edge of its range.
func mutations(req proto.Message) map[string]proto.Message {
	out := map[string]proto.Message{}
	var walk func(path []int, m protoreflect.Message, depth int, name string)
	walk = func(path []int, m protoreflect.Message, depth int, name string) {
		fs := m.Descriptor().Fields()
		for i := range fs.Len() {
			f := fs.Get(i)
			fname := name + "." + string(f.Name())
			for label, set := range edges(f) {
				c := proto.Clone(req)
				target := follow(c.ProtoReflect(), path)
				if target == nil {
					continue
				}
				set(target, f)
				out[fname+"="+label] = c
			}
			if f.Kind() == protoreflect.MessageKind && !f.IsMap() && depth < 3 {
				if f.IsList() {
					if l := m.Get(f).List(); l.Len() > 0 {
						walk(append(slices.Clone(path), i, 0), l.Get(0).Message(), depth+1, fname+"[0]")
					}
				} else if m.Has(f) {
					walk(append(slices.Clone(path), i, -1), m.Get(f).Message(), depth+1, fname)
				}
			}
		}
	}
	walk(nil, req.ProtoReflect(), 0, "")
	return out
}

// follow goes down path (field index, list index or -1) from m.
func follow(m protoreflect.Message, path []int) protoreflect.Message {
	for i := 0; i < len(path); i += 2 {
		f := m.Descriptor().Fields().Get(path[i])
		if path[i+1] >= 0 {
			m = m.Mutable(f).List().Get(path[i+1]).Message()
		} else {
			m = m.Mutable(f).Message()
		}
	}
	return m
}

type setter func(protoreflect.Message, protoreflect.FieldDescriptor)

func edges(f protoreflect.FieldDescriptor) map[string]setter {
	out := map[string]setter{
		"unset": func(m protoreflect.Message, f protoreflect.FieldDescriptor) { m.Clear(f) },
	}
	if f.IsMap() {
		return out
	}
	if f.IsList() {
		out["dup"] = func(m protoreflect.Message, f protoreflect.FieldDescriptor) {
			l := m.Mutable(f).List()
			if l.Len() > 0 {
				l.Append(l.Get(0))
			}
		}
		out["x5000"] = func(m protoreflect.Message, f protoreflect.FieldDescriptor) {
			l := m.Mutable(f).List()
			if l.Len() > 0 {
				v := l.Get(0)
				for range 5000 {
					l.Append(v)
				}
			}
		}
		return out
	}
	val := func(v protoreflect.Value) setter {
		return func(m protoreflect.Message, f protoreflect.FieldDescriptor) { m.Set(f, v) }
	}
	switch f.Kind() {
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		for _, v := range []int64{math.MinInt64, math.MinInt64 + 1, -2, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64} {
			out[itoa64(v)] = val(protoreflect.ValueOfInt64(v))
		}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		for _, v := range []int32{math.MinInt32, -1, 0, 1, math.MaxInt32} {
			out[itoa64(int64(v))] = val(protoreflect.ValueOfInt32(v))
		}
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		for _, v := range []uint64{0, 1, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64} {
			out["u"+itoa64(int64(v))] = val(protoreflect.ValueOfUint64(v))
		}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		for _, v := range []uint32{0, math.MaxInt32 + 1, math.MaxUint32} {
			out["u"+itoa64(int64(v))] = val(protoreflect.ValueOfUint32(v))
		}
	case protoreflect.StringKind:
		for k, v := range map[string]string{"empty": "", "long": strings.Repeat("a", 1<<20), "nul": "a\x00b", "space": " ", "port": "127.0.0.1:99999", "url": "djinn://[::1]:0/x?y#z"} {
			out[k] = val(protoreflect.ValueOfString(v))
		}
	case protoreflect.BytesKind:
		for k, v := range map[string][]byte{"empty": {}, "zero16": make([]byte, 16), "ff16": []byte(strings.Repeat("\xff", 16)), "17": make([]byte, 17), "1M": make([]byte, 1<<20)} {
			out[k] = val(protoreflect.ValueOfBytes(v))
		}
	case protoreflect.EnumKind:
		for _, v := range []protoreflect.EnumNumber{-1, 0, 99} {
			out["enum"+itoa64(int64(v))] = val(protoreflect.ValueOfEnum(v))
		}
	case protoreflect.DoubleKind:
		for k, v := range map[string]float64{"nan": math.NaN(), "inf": math.Inf(1), "-inf": math.Inf(-1)} {
			out[k] = val(protoreflect.ValueOfFloat64(v))
		}
	}
	return out
}

func itoa64(v int64) string {
	switch v {
	case math.MinInt64:
		return "min"
	case math.MaxInt64:
		return "max"
	}
	return strconv.FormatInt(v, 10)
}

// newOutput returns an empty response message of method m.
func newOutput(t *testing.T, m string) proto.Message {
	t.Helper()
	service, name, _ := strings.Cut(strings.TrimPrefix(m, "/"), "/")
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		t.Fatalf("%s: %v", m, err)
	}
	md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(name))
	return dynamicpb.NewMessage(md.Output())
}

// TestEveryRPCTakesEdgeValues (DESIGN.md 8: a clear error for every bad
// input, never a panic or a hang): every unary RPC's valid request — the
// one its authorization matrix row makes — with one field at a time, at
// any depth, unset or set to an edge of its range (int64 and int32
// extremes, -1, 0, 1; empty, long, NUL and odd strings; ids of 0, 15, 17
// bytes, all zero, all ones, 1 MB; unknown enum numbers; NaN and
// infinities; a repeated field's element twice or 5000 times), is
// answered, on its own and carried in a session — success or a refusal —
// never Internal, Unknown (a panic the edge caught) or no answer within
// the call's bound. TestEveryRPCTakesJunk
// sends random requests, which mostly fail their first check; these get
// past it.
func TestEveryRPCTakesEdgeValues(t *testing.T) {
	t.Parallel()
	e := newMatrixEnv(t)
	skip := []string{"/djinn.v1.Admin/Leave", "/djinn.v1.Admin/TransferLeadership", "/djinn.v1.Admin/RemoveMember",
		"/djinn.v1.Admin/Join", "/djinn.v1.Admin/AddMember"}
	rows := matrixRows()
	unary := server.SessionMethods(e.srv)
	tried := 0
	for _, m := range slices.Sorted(maps.Keys(rows)) {
		if slices.Contains(skip, m) || !unary[m] {
			continue
		}
		r := &resources{t: t, owner: e.conns[asOwner], srv: e.srv, caller: asOwner}
		cp := &capture{ClientConnInterface: e.conns[asOwner], method: m}
		ctx, cancel := context.WithTimeout(context.Background(), matrixTimeout)
		_ = rows[m](ctx, cp, r, true)
		cancel()
		if cp.req == nil {
			t.Errorf("%s: its matrix row made no call of it", m)
			continue
		}
		muts := mutations(cp.req)
		for _, name := range slices.Sorted(maps.Keys(muts)) {
			for _, p := range paths {
				ctx, cancel := context.WithTimeout(context.Background(), matrixTimeout)
				err := p.conn(e.conns[asOwner]).Invoke(ctx, m, muts[name], newOutput(t, m))
				cancel()
				tried++
				// A session's answer comes back as a djinn error: its code
				// is the one its status had.
				if c := status.Code(grpcerr.Status(err)); c == codes.Internal || c == codes.Unknown || c == codes.DeadlineExceeded {
					t.Errorf("%s%s with %s: %v", m, p.name, name, err)
				}
			}
		}
	}
	t.Logf("%d calls, one field at an edge each", tried)
}
