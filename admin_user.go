package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/korvet/korvet/engine/auth"
)

// admin_user names korvet's first super user; korvet creates it from
// admin_password_file on its first start.

// checkAdminUser validates admin_user and admin_password_file.
func (c *Config) checkAdminUser(bad func(k toml.Key, format string, args ...any) error) error {
	if c.AdminUser != "" {
		if err := auth.ValidUserName(c.AdminUser); err != nil {
			return bad(toml.Key{"admin_user"}, "%v", err)
		}
		if c.AdminPasswordFile == "" {
			return bad(toml.Key{"admin_password_file"}, "admin_user %q needs a file with its first password", c.AdminUser)
		}
	}
	return nil
}

// superUsers are kafka.super_users and the admin user: super on every
// door.
func (c *Config) superUsers() []string {
	su := slices.Clone(c.Kafka.SuperUsers)
	if p := "User:" + c.AdminUser; c.AdminUser != "" && !slices.Contains(su, p) {
		su = append(su, p)
	}
	return su
}

// ensureAdmin creates admin_user from admin_password_file when the user
// has no credentials yet; an existing user is left as it is (change its
// password with `korvet user add`).
func ensureAdmin(ctx context.Context, cfg Config, users *auth.Store, log *slog.Logger) error {
	if cfg.AdminUser == "" {
		return nil
	}
	b, err := os.ReadFile(cfg.AdminPasswordFile)
	if err != nil {
		return fmt.Errorf("admin_password_file: %w", err)
	}
	password, _, _ := strings.Cut(string(b), "\n")
	password = strings.TrimSuffix(password, "\r")
	if password == "" {
		return fmt.Errorf("admin_password_file %s: the first line is empty", cfg.AdminPasswordFile)
	}
	created, err := users.AddUserIfAbsent(ctx, cfg.AdminUser, password, auth.DefaultIterations)
	if err != nil {
		return fmt.Errorf("create admin_user %q: %w", cfg.AdminUser, err)
	}
	if created {
		log.Info("created the admin user from admin_password_file", "user", cfg.AdminUser, "file", cfg.AdminPasswordFile)
	}
	return nil
}
