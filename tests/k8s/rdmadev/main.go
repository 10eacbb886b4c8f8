// SPDX-License-Identifier: Apache-2.0

// orh-rdmadev: the Kubernetes lane's allocators of the sample node's HCAs (tests/k8s).
//
//	orh-rdmadev deviceplugin NODE KUBELET-ROOT  a device plugin (deviceplugin v1beta1) of
//	    the resource rdma/hca: one device per HCA, Allocate gives the HCA's uverbs node
//	orh-rdmadev dra NODE KUBELET-ROOT CDI-DIR KUBECONFIG  a DRA driver (kubeletplugin):
//	    the HCAs and GPUs as devices of a resource.k8s.io/v1 ResourceSlice, each prepared
//	    as a CDI device (its uverbs or nvidia node; each request's KEP-5304 device metadata
//	    file)
//
// NODE is the sample node's root (tests/mknode.py --devnodes); KUBELET-ROOT the kubelet's
// root directory as seen from here; ORH_RDMADEV_HCAS (a comma list of HCA names) limits
// both to those HCAs (the DRA driver publishes every GPU). Runs until SIGTERM.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var err error
	switch {
	case len(os.Args) == 4 && os.Args[1] == "deviceplugin":
		err = runDevicePlugin(ctx, os.Args[2], os.Args[3])
	case len(os.Args) == 6 && os.Args[1] == "dra":
		err = runDRA(ctx, os.Args[2], os.Args[3], os.Args[4], os.Args[5])
	default:
		err = fmt.Errorf("usage: orh-rdmadev deviceplugin NODE KUBELET-ROOT | dra NODE KUBELET-ROOT CDI-DIR KUBECONFIG")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "orh-rdmadev:", err)
		os.Exit(1)
	}
}
