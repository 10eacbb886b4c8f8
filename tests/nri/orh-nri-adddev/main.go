// SPDX-License-Identifier: Apache-2.0

// orh-nri-adddev is the second NRI plugin of tests/e2e/e2e-nri.sh: beside oci-rdma-hook's
// own plugin it adds one character device to every container whose pod carries the
// annotation given by -annotation, so that a container served by both shows both
// plugins' devices. It logs one line per container it is offered to stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

type plugin struct {
	annotation string
	dev        *api.LinuxDevice
}

func (p *plugin) CreateContainer(_ context.Context, pod *api.PodSandbox,
	ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	adj := &api.ContainerAdjustment{}
	if pod.GetAnnotations()[p.annotation] != "true" {
		fmt.Fprintf(os.Stderr, "orh-nri-adddev: %q: not asked\n", ctr.GetName())
		return adj, nil, nil
	}
	adj.AddDevice(p.dev)
	fmt.Fprintf(os.Stderr, "orh-nri-adddev: %q: added %s (%d:%d)\n", ctr.GetName(),
		p.dev.Path, p.dev.Major, p.dev.Minor)
	return adj, nil, nil
}

func main() {
	socket := flag.String("socket", "", "the runtime's NRI socket")
	name := flag.String("name", "orh-nri-adddev", "the plugin's name")
	idx := flag.String("idx", "60", "the plugin's index")
	annotation := flag.String("annotation", "orh-e2e/add-device", "the pod annotation that asks")
	path := flag.String("path", "/dev/orh-extra", "the device's path in the container")
	major := flag.Int64("major", 240, "the device's major number")
	minor := flag.Int64("minor", 7, "the device's minor number")
	flag.Parse()

	p := &plugin{annotation: *annotation, dev: &api.LinuxDevice{
		Path: *path, Type: "c", Major: *major, Minor: *minor,
		FileMode: &api.OptionalFileMode{Value: 0o666},
	}}
	opts := []stub.Option{stub.WithPluginName(*name), stub.WithPluginIdx(*idx)}
	if *socket != "" {
		opts = append(opts, stub.WithSocketPath(*socket))
	}
	s, err := stub.New(p, opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "orh-nri-adddev: %v\n", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := s.Run(ctx); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "orh-nri-adddev: %v\n", err)
		os.Exit(1)
	}
}
