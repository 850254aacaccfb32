package sowdb_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	sowdb "github.com/sowdb/sowdb/clients/go"
	"github.com/sowdb/sowdb/clients/go/internal/sowdtest"
)

// The SDKs' shared cases (clients/cases/cases.json, its README says the format), run by the Go
// SDK against a live sowd with tests/topics.toml: the Python, Node and Java SDKs run the same
// table, so that one call means one thing in every language.

type caseStep struct {
	Op         string   `json:"op"`
	Topic      string   `json:"topic"`
	Docs       []any    `json:"docs"`
	Filter     *string  `json:"filter"`
	OrderBy    *string  `json:"order_by"`
	TopN       int      `json:"top_n"`
	BatchSize  int      `json:"batch_size"`
	Select     string   `json:"select"`
	Grouping   []string `json:"grouping"`
	Projection []string `json:"projection"`
	Expect     *struct {
		Docs    *[]any   `json:"docs"`
		Deleted *float64 `json:"deleted"`
		Error   *struct {
			Code   string  `json:"code"`
			Field  *string `json:"field"`
			Reason *string `json:"reason"`
			Column *int    `json:"column"`
		} `json:"error"`
	} `json:"expect"`
}

type sharedCase struct {
	Name  string     `json:"name"`
	Steps []caseStep `json:"steps"`
}

func loadCases(t *testing.T) []sharedCase {
	b, err := os.ReadFile(filepath.Join(sowdtest.Repo, "clients", "cases", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Cases []sharedCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Cases) == 0 {
		t.Fatal("cases.json has no cases")
	}
	return table.Cases
}

// call runs one step: the documents of a sow, the count of a delete, nothing for a publish.
func call(ctx context.Context, c *sowdb.Client, s caseStep) (any, error) {
	switch s.Op {
	case "publish":
		_, err := c.Publish(ctx, s.Topic, s.Docs, nil)
		return nil, err
	case "delete":
		r, err := c.SowDelete(ctx, s.Topic, sowdb.Delete{Filter: deref(s.Filter)})
		return float64(r.DeletedCount), err
	case "sow":
		q := sowdb.Query{Filter: deref(s.Filter), OrderBy: deref(s.OrderBy), TopN: s.TopN, BatchSize: s.BatchSize,
			Select: s.Select, Grouping: s.Grouping, Projection: s.Projection}
		docs := []any{}
		for r, err := range c.Sow(ctx, s.Topic, q) {
			if err != nil {
				return nil, err
			}
			var d any
			if err := r.Decode(&d); err != nil {
				return nil, err
			}
			docs = append(docs, d)
		}
		return docs, nil
	}
	return nil, errors.New("unknown op " + s.Op)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestSharedCases(t *testing.T) {
	cases := loadCases(t)
	srv := sowdtest.Start(t, sowdtest.Options{})
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := sowdb.NewClient(srv.Address)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for i, s := range tc.Steps {
				got, err := call(ctx, c, s)
				if s.Expect != nil && s.Expect.Error != nil {
					checkCaseError(t, i, err, s)
					continue
				}
				if err != nil {
					t.Fatalf("step %d (%s): %v", i, s.Op, err)
				}
				if s.Expect == nil {
					continue
				}
				if s.Expect.Docs != nil {
					want := *s.Expect.Docs
					gotDocs := got.([]any)
					if s.OrderBy == nil {
						sortDocs(gotDocs)
						sortDocs(want)
					}
					if !reflect.DeepEqual(gotDocs, want) {
						t.Fatalf("step %d (sow): got %v, want %v", i, gotDocs, want)
					}
				}
				if s.Expect.Deleted != nil && got != *s.Expect.Deleted {
					t.Fatalf("step %d (delete): deleted %v, want %v", i, got, *s.Expect.Deleted)
				}
			}
		})
	}
}

func checkCaseError(t *testing.T, i int, err error, s caseStep) {
	t.Helper()
	want := s.Expect.Error
	var e *sowdb.Error
	if !errors.As(err, &e) {
		t.Fatalf("step %d (%s): want a %s *sowdb.Error, got %v", i, s.Op, want.Code, err)
	}
	if e.CodeName() != want.Code {
		t.Fatalf("step %d: code %s, want %s (%v)", i, e.CodeName(), want.Code, e)
	}
	if want.Field != nil && e.Field() != *want.Field {
		t.Fatalf("step %d: field %q, want %q (%v)", i, e.Field(), *want.Field, e.FieldViolations)
	}
	if want.Reason != nil && e.Reason != *want.Reason {
		t.Fatalf("step %d: reason %q, want %q", i, e.Reason, *want.Reason)
	}
	if want.Column != nil && e.Column() != *want.Column {
		t.Fatalf("step %d: column %d, want %d (%v)", i, e.Column(), *want.Column, e.Metadata)
	}
}

func sortDocs(docs []any) {
	key := func(d any) string { b, _ := json.Marshal(d); return string(b) } // encoding/json sorts map keys
	sort.Slice(docs, func(a, b int) bool { return key(docs[a]) < key(docs[b]) })
}
