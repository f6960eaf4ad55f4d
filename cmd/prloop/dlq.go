package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/prloop/prloop/pkg/events"
	"github.com/prloop/prloop/pkg/natsx"
)

// deadLetter is one message of PRLOOP_DLQ.
type deadLetter struct {
	ID         uint64 // its sequence in PRLOOP_DLQ
	Consumer   string
	Subject    string // the event's own subject
	Reason     string
	Deliveries string
	Time       time.Time
	msg        *jetstream.RawStreamMsg
}

// dlqStream is the part of jetstream.Stream that prloop dlq uses.
type dlqStream interface {
	Info(ctx context.Context, opts ...jetstream.StreamInfoOpt) (*jetstream.StreamInfo, error)
	GetMsg(ctx context.Context, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error)
	DeleteMsg(ctx context.Context, seq uint64) error
}

func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usage := func() {
		fmt.Fprintf(stderr, "Usage:\n  prloop dlq list                  the dead letters: messages a service gave up on\n"+
			"  prloop dlq replay [-id SEQ ...]  publish them again to their subjects (all without -id) and remove them\n")
	}
	if len(args) == 0 || (args[0] != "list" && args[0] != "replay") {
		usage()
		return fmt.Errorf("%w: prloop dlq needs list or replay", errUsage)
	}
	fs := flag.NewFlagSet("prloop dlq "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var ids seqList
	if args[0] == "replay" {
		fs.Var(&ids, "id", "the ID (as 'prloop dlq list' shows it) of a dead letter to replay; repeat for several; none replays all")
	}
	fs.Usage = func() { usage(); fs.PrintDefaults() }
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	conn, err := connectCLI(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	s, err := conn.JS.Stream(ctx, events.DLQStreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("no dead-letter stream %s in this NATS: has prloop run against it?", events.DLQStreamName)
	}
	if err != nil {
		return withCredsHint(fmt.Errorf("open stream %s: %w", events.DLQStreamName, err), conn)
	}
	letters, err := listDeadLetters(ctx, s)
	if err != nil {
		return withCredsHint(err, conn)
	}
	if args[0] == "list" {
		return printDeadLetters(stdout, letters)
	}
	return replay(ctx, conn, s, letters, ids, stdout)
}

// seqList is a repeatable -id flag.
type seqList []uint64

func (l *seqList) String() string { return fmt.Sprint([]uint64(*l)) }

func (l *seqList) Set(v string) error {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return fmt.Errorf("dead-letter id %q is not a number", v)
	}
	*l = append(*l, n)
	return nil
}

// listDeadLetters reads every message of the dead-letter stream, oldest
// first.
func listDeadLetters(ctx context.Context, s dlqStream) ([]deadLetter, error) {
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read stream %s: %w", events.DLQStreamName, err)
	}
	var out []deadLetter
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		// next_by_subj skips the sequences of removed messages.
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(events.DLQPrefix+".>"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read dead letter %d: %w", seq, err)
		}
		out = append(out, deadLetter{
			ID: m.Sequence, Consumer: m.Header.Get(events.HeaderDLQConsumer), Subject: m.Header.Get(events.HeaderDLQSubject),
			Reason: m.Header.Get(events.HeaderDLQReason), Deliveries: m.Header.Get(events.HeaderDLQDeliveries), Time: m.Time, msg: m,
		})
		seq = m.Sequence
	}
	return out, nil
}

func printDeadLetters(w io.Writer, letters []deadLetter) error {
	if len(letters) == 0 {
		_, err := fmt.Fprintln(w, "no dead letters")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCONSUMER\tSUBJECT\tREASON\tDELIVERIES\tTIME")
	for _, l := range letters {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", l.ID, l.Consumer, l.Subject, oneLine(l.Reason), l.Deliveries, l.Time.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// replay publishes the chosen dead letters (all when ids is empty) to the
// subjects they came from, then removes them from the dead-letter stream.
//
// The event keeps its CloudEvent id, so the services' own idempotency
// (ids derived from what an event is about) applies to it. Its JetStream
// message id is the original id marked as a replay of this dead letter:
// the original id itself would be dropped as a duplicate of the original
// publish for the stream's duplicate window, while this one makes a second
// replay of the same dead letter within the window a duplicate.
func replay(ctx context.Context, conn *natsx.Conn, s dlqStream, letters []deadLetter, ids seqList, stdout io.Writer) error {
	byID := map[uint64]deadLetter{}
	for _, l := range letters {
		byID[l.ID] = l
	}
	chosen := letters
	if len(ids) > 0 {
		chosen = nil
		for _, id := range ids {
			l, ok := byID[id]
			if !ok {
				return fmt.Errorf("no dead letter %d ('prloop dlq list' shows them)", id)
			}
			chosen = append(chosen, l)
		}
	}
	for _, l := range chosen {
		e, _, err := events.Decode(l.msg.Data)
		if err != nil || l.Subject == "" {
			return fmt.Errorf("dead letter %d cannot be replayed: not a prloop event (%v); remove it with 'nats stream rmm %s %d'", l.ID, err, events.DLQStreamName, l.ID)
		}
		m := nats.NewMsg(l.Subject)
		for k, v := range l.msg.Header {
			if !strings.HasPrefix(k, "Prloop-Dlq-") && !strings.HasPrefix(k, "Nats-") {
				m.Header[k] = v
			}
		}
		m.Data = l.msg.Data
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ack, err := conn.JS.PublishMsg(pctx, m, jetstream.WithMsgID(e.ID()+":replay:"+strconv.FormatUint(l.ID, 10)))
		cancel()
		if err != nil {
			if refused(conn) {
				return fmt.Errorf("replay dead letter %d: these credentials may not publish to %s (%s's events are published by their own service): "+
					"replay with credentials that may, such as prloop's data-directory key where 'prloop run' runs", l.ID, l.Subject, e.Type())
			}
			return withCredsHint(fmt.Errorf("replay dead letter %d to %s: %w", l.ID, l.Subject, err), conn)
		}
		if err := s.DeleteMsg(ctx, l.ID); err != nil {
			return withCredsHint(fmt.Errorf("remove replayed dead letter %d from %s: %w", l.ID, events.DLQStreamName, err), conn)
		}
		note := ""
		if ack.Duplicate {
			note = " (already replayed)"
		}
		fmt.Fprintf(stdout, "replayed %d: %s %s to %s%s\n", l.ID, e.Type(), e.ID(), l.Subject, note)
	}
	return nil
}

// refused reports whether the server refused the connection's last
// publish for want of permission.
func refused(conn *natsx.Conn) bool {
	err := conn.NC.LastError()
	return err != nil && (errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(strings.ToLower(err.Error()), "permissions violation"))
}
