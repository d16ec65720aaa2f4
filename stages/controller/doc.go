// Package controller turns job progress into scaling decisions.
//
// The strategies are plugins (package plugin defines the interface; one
// package per strategy under plugin/); the built-in ones are listed in
// package plugin/builtin. Package sim runs the same plugins in a deterministic
// discrete-event simulation. docs/control.md explains every controller.
package controller
