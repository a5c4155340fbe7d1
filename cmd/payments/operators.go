package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/acmepay/payments/internal/console"
	"github.com/acmepay/payments/internal/postgres"
)

// operatorsCommand runs `payments operators <command>`: the console's named
// operators. Flags are checked before any setting is read.
func operatorsCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, groupUsage("operators"))
		return usageErrorf("operators: a command is required")
	}
	var runIt func(*postgres.ConsoleStore) error
	switch args[0] {
	case "create", "disable":
		fs := flag.NewFlagSet("operators "+args[0], flag.ContinueOnError)
		name := fs.String("name", "", "the operator's name, as the audit trail shows it")
		if err := parseFlags(fs, args[1:], "name"); err != nil {
			return err
		}
		if args[0] == "create" {
			if err := console.CheckOperatorName(*name); err != nil {
				return usageErrorf("operators create: %v", err)
			}
			runIt = func(s *postgres.ConsoleStore) error { return operatorsCreate(ctx, s, *name, stdout) }
		} else {
			runIt = func(s *postgres.ConsoleStore) error { return operatorsDisable(ctx, s, *name, stdout) }
		}
	case "list":
		fs := flag.NewFlagSet("operators list", flag.ContinueOnError)
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		runIt = func(s *postgres.ConsoleStore) error {
			ops, err := s.ConsoleOperatorList(ctx)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(stdout)
			for _, op := range ops {
				if err := enc.Encode(op); err != nil {
					return err
				}
			}
			return nil
		}
	default:
		fmt.Fprint(stderr, groupUsage("operators"))
		return usageErrorf("unknown command %q", "operators "+args[0])
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := migrate(ctx, cfg, db); err != nil {
		return err
	}
	return runIt(postgres.NewConsoleStore(db))
}

func operatorsCreate(ctx context.Context, s *postgres.ConsoleStore, name string, stdout io.Writer) error {
	op, token, err := console.CreateOperator(ctx, s, name, time.Now())
	if errors.Is(err, console.ErrOperatorNameTaken) {
		return fmt.Errorf("operators create: %q: %w", name, err)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(struct {
		console.Operator
		Token string `json:"token"`
	}{op, token})
}

func operatorsDisable(ctx context.Context, s *postgres.ConsoleStore, name string, stdout io.Writer) error {
	ok, err := s.ConsoleOperatorDisable(ctx, name, time.Now())
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("operators disable: no enabled operator is named %q", name)
	}
	return json.NewEncoder(stdout).Encode(map[string]any{"name": name, "disabled": true})
}
