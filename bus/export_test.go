package bus

// Drained is drained, for the tests of package bus_test.
var Drained = drained
