// The sandbox ("pause") program of tests/env's real nodes, packed into an
// image by tests/env/images. No dependencies.
module raygate.local/envbin/pause

go 1.24
