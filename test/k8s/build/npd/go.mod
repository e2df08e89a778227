// node-problem-detector for the end-to-end test (test/k8s/build-npd.sh, which
// sets the require line to NPD_VERSION): the
// released module's own main, built from a module of ours because the
// module proxy's copy of a main package cannot be built in place (the
// module cache is read-only). No upstream code lives here.
module nrigate.test/npd-build

go 1.26.0

require k8s.io/node-problem-detector v1.34.0
