// Package eventclock provides the clock the APF engine runs on: a reading of
// the current time plus the ability to run a function once a duration has
// passed (used to release lingering final-phase seats).
//
// Real adapts a k8s.io/utils/clock.Clock. Fake is a discrete-event clock for
// tests and simulations: time moves only in Run or Step, and due events run
// synchronously on the caller's goroutine in (time, scheduling order) order, so
// every replay is exactly repeatable. Upstream's fake clock fires events in
// goroutines and needs a goroutine counter to detect quiescence; Pace's engine
// never blocks inside an event, so a single-threaded driver is enough.
package eventclock
