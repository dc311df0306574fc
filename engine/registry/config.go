package registry

import (
	"context"
	"fmt"

	"github.com/korvet/korvet/engine/schema"
	"github.com/korvet/korvet/resp"
)

// The SchemaConfig hash's fields: "compatibility" and "mode" are global,
// "compatibility:{subject}" and "mode:{subject}" a subject's own.
func levelField(subject string) string {
	if subject == "" {
		return "compatibility"
	}
	return "compatibility:" + subject
}

func modeField(subject string) string {
	if subject == "" {
		return "mode"
	}
	return "mode:" + subject
}

// configs is the whole SchemaConfig hash, for answers about many subjects.
type configs map[string]string

func (r *Registry) configAll(ctx context.Context) (configs, error) {
	v, err := r.do(ctx, "HGETALL", r.k.SchemaConfig())
	if err != nil {
		return nil, fmt.Errorf("read registry config: %w", err)
	}
	c := configs{}
	var f string
	i := 0
	v.ForEach(func(e resp.Reply) bool {
		if i%2 == 0 {
			f = string(e.Bytes())
		} else {
			c[f] = string(e.Bytes())
		}
		i++
		return true
	})
	return c, nil
}

// level is the level in effect for subject and whether it is the
// subject's own.
func (c configs) level(subject string) (schema.Level, bool) {
	if l, ok := c[levelField(subject)]; ok && subject != "" {
		return schema.Level(l), true
	}
	if l, ok := c[levelField("")]; ok {
		return schema.Level(l), false
	}
	return schema.DefaultLevel, false
}

// mode is the mode in effect for subject: READONLY_OVERRIDE set globally
// wins over a subject's own mode.
func (c configs) mode(subject string) Mode {
	global := Mode(c[modeField("")])
	switch {
	case subject == "" && global == "":
		return ReadWrite
	case subject == "":
		return global
	case global == ReadOnlyOverride:
		return ReadOnly
	}
	if m, ok := c[modeField(subject)]; ok {
		return Mode(m)
	}
	if global == "" {
		return ReadWrite
	}
	return global
}

func (r *Registry) field(ctx context.Context, field string) (string, bool, error) {
	v, err := r.do(ctx, "HGET", r.k.SchemaConfig(), field)
	if err != nil {
		return "", false, fmt.Errorf("read registry config %s: %w", field, err)
	}
	if v.IsNil() {
		return "", false, nil
	}
	return string(v.Bytes()), true, nil
}

// effective reads the level and mode in effect for subject.
func (r *Registry) effective(ctx context.Context, subject string) (schema.Level, Mode, error) {
	v, err := r.do(ctx, "HMGET", r.k.SchemaConfig(), levelField(subject), levelField(""), modeField(subject), modeField(""))
	if err != nil {
		return "", "", fmt.Errorf("read registry config: %w", err)
	}
	c := configs{}
	names := []string{levelField(subject), levelField(""), modeField(subject), modeField("")}
	i := 0
	v.ForEach(func(e resp.Reply) bool {
		if !e.IsNil() {
			c[names[i]] = string(e.Bytes())
		}
		i++
		return true
	})
	l, _ := c.level(subject)
	return l, c.mode(subject), nil
}

// Level returns the compatibility level in effect for subject ("" for the
// global one) and whether subject has its own.
func (r *Registry) Level(ctx context.Context, subject string) (schema.Level, bool, error) {
	l, _, err := r.effective(ctx, subject)
	if err != nil || subject == "" {
		return l, false, err
	}
	_, own, err := r.field(ctx, levelField(subject))
	return l, own, err
}

// SubjectLevel returns subject's own level: 40408 when it has none.
func (r *Registry) SubjectLevel(ctx context.Context, subject string) (schema.Level, error) {
	l, ok, err := r.field(ctx, levelField(subject))
	if err != nil {
		return "", err
	}
	if !ok {
		return "", notFound(CodeSubjectLevelNotFound, "Subject '%s' does not have subject-level compatibility configured", subject)
	}
	return schema.Level(l), nil
}

// SetLevel sets subject's level ("" the global one).
func (r *Registry) SetLevel(ctx context.Context, subject string, l schema.Level) error {
	if subject != "" {
		if err := checkSubject(subject); err != nil {
			return err
		}
	}
	if _, err := schema.ParseLevel(string(l)); err != nil {
		return unprocessable(CodeInvalidLevel, "Invalid compatibility level %q: want NONE, BACKWARD, FORWARD, FULL or one of them with _TRANSITIVE", l)
	}
	if _, err := r.do(ctx, "HSET", r.k.SchemaConfig(), levelField(subject), string(l)); err != nil {
		return fmt.Errorf("set compatibility of %q: %w", subject, err)
	}
	return nil
}

// DeleteLevel removes subject's own level ("" resets the global one to
// the default) and returns what it was.
func (r *Registry) DeleteLevel(ctx context.Context, subject string) (schema.Level, error) {
	old, ok, err := r.getDel(ctx, levelField(subject))
	if err != nil {
		return "", err
	}
	if !ok {
		if subject == "" {
			return schema.DefaultLevel, nil
		}
		return "", notFound(CodeSubjectLevelNotFound, "Subject '%s' does not have subject-level compatibility configured", subject)
	}
	return schema.Level(old), nil
}

// Mode returns the mode in effect for subject ("" global).
func (r *Registry) Mode(ctx context.Context, subject string) (Mode, error) {
	_, m, err := r.effective(ctx, subject)
	return m, err
}

// SubjectMode returns subject's own mode: 40409 when it has none.
func (r *Registry) SubjectMode(ctx context.Context, subject string) (Mode, error) {
	m, ok, err := r.field(ctx, modeField(subject))
	if err != nil {
		return "", err
	}
	if !ok {
		return "", notFound(CodeSubjectModeNotFound, "Subject '%s' does not have subject-level mode configured", subject)
	}
	return Mode(m), nil
}

// SetMode sets subject's mode ("" the global one). The global IMPORT
// mode needs an empty registry unless force: imported ids must not clash
// with ones handed out.
func (r *Registry) SetMode(ctx context.Context, subject string, m Mode, force bool) error {
	if subject != "" {
		if err := checkSubject(subject); err != nil {
			return err
		}
	}
	if _, err := ParseMode(string(m)); err != nil {
		return err
	}
	if m == Import && !force {
		if subject == "" {
			n, err := r.do(ctx, "HLEN", r.k.Subjects())
			if err != nil {
				return fmt.Errorf("count subjects: %w", err)
			}
			if c, _ := n.Int(); c > 0 {
				return unprocessable(CodeOperationNotPermitted, "Cannot import since found existing subjects (set force=true to import anyway)")
			}
		} else if st, _, err := r.subject(ctx, subject); err != nil {
			return err
		} else if st != nil && len(st.Versions) > 0 {
			return unprocessable(CodeOperationNotPermitted, "Cannot import since found existing subject '%s' (set force=true to import anyway)", subject)
		}
	}
	if _, err := r.do(ctx, "HSET", r.k.SchemaConfig(), modeField(subject), string(m)); err != nil {
		return fmt.Errorf("set mode of %q: %w", subject, err)
	}
	return nil
}

// DeleteMode removes subject's own mode ("" resets the global one) and
// returns what it was.
func (r *Registry) DeleteMode(ctx context.Context, subject string) (Mode, error) {
	old, ok, err := r.getDel(ctx, modeField(subject))
	if err != nil {
		return "", err
	}
	if !ok {
		if subject == "" {
			return ReadWrite, nil
		}
		return "", notFound(CodeSubjectModeNotFound, "Subject '%s' does not have subject-level mode configured", subject)
	}
	return Mode(old), nil
}

func (r *Registry) getDel(ctx context.Context, field string) (string, bool, error) {
	v, err := getDelScript.run(ctx, r.rc, []string{r.k.SchemaConfig()}, field)
	if err != nil {
		return "", false, fmt.Errorf("delete registry config %s: %w", field, err)
	}
	if v.IsNil() {
		return "", false, nil
	}
	return string(v.Bytes()), true, nil
}
