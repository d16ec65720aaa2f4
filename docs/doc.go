// Package docs holds Pace's documentation pages. Its test runs every shell
// block of README.md and docs/*.md, as written, against a live 'pace up'
// (see development.md, "Runnable documentation").
package docs
