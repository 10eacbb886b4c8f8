// SPDX-License-Identifier: Apache-2.0
package main

// A device plugin of the resource rdma/hca: registered with the kubelet at
// KUBELET-ROOT/device-plugins/kubelet.sock, its own socket beside it; ListAndWatch lists
// the node's HCAs by name, Allocate answers each with its uverbs node (host path the
// node's, container path /dev/infiniband/uverbsN) and logs what it gave.

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	dp "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const resourceName = "rdma/hca"

type devicePlugin struct {
	dp.UnimplementedDevicePluginServer
	hcas map[string]hca
	ctx  context.Context
}

func (p *devicePlugin) GetDevicePluginOptions(context.Context, *dp.Empty) (*dp.DevicePluginOptions, error) {
	return &dp.DevicePluginOptions{}, nil
}

func (p *devicePlugin) ListAndWatch(_ *dp.Empty, s dp.DevicePlugin_ListAndWatchServer) error {
	var devs []*dp.Device
	for name := range p.hcas {
		devs = append(devs, &dp.Device{ID: name, Health: dp.Healthy})
	}
	if err := s.Send(&dp.ListAndWatchResponse{Devices: devs}); err != nil {
		return err
	}
	select {
	case <-p.ctx.Done():
	case <-s.Context().Done():
	}
	return nil
}

func (p *devicePlugin) Allocate(_ context.Context, req *dp.AllocateRequest) (*dp.AllocateResponse, error) {
	resp := &dp.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		cr := &dp.ContainerAllocateResponse{}
		for _, id := range c.DevicesIds {
			h, ok := p.hcas[id]
			if !ok {
				return nil, fmt.Errorf("Allocate: no HCA %q on this node", id)
			}
			cr.Devices = append(cr.Devices, &dp.DeviceSpec{
				ContainerPath: "/dev/infiniband/" + h.Uverbs, HostPath: h.HostPath, Permissions: "rw"})
			log.Printf("allocated %s: %s", id, h.HostPath)
		}
		resp.ContainerResponses = append(resp.ContainerResponses, cr)
	}
	return resp, nil
}

func (p *devicePlugin) PreStartContainer(context.Context, *dp.PreStartContainerRequest) (*dp.PreStartContainerResponse, error) {
	return &dp.PreStartContainerResponse{}, nil
}

func (p *devicePlugin) GetPreferredAllocation(context.Context, *dp.PreferredAllocationRequest) (*dp.PreferredAllocationResponse, error) {
	return &dp.PreferredAllocationResponse{}, nil
}

func runDevicePlugin(ctx context.Context, node, kubeletRoot string) error {
	list, err := readNode(node)
	if err != nil {
		return err
	}
	p := &devicePlugin{hcas: map[string]hca{}, ctx: ctx}
	for _, h := range list {
		p.hcas[h.Name] = h
	}
	dir := filepath.Join(kubeletRoot, "device-plugins")
	sock := filepath.Join(dir, "orh-rdma-hca.sock")
	os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	dp.RegisterDevicePluginServer(srv, p)
	go srv.Serve(l)
	defer srv.Stop()

	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = dp.NewRegistrationClient(conn).Register(ctx, &dp.RegisterRequest{
		Version: dp.Version, Endpoint: filepath.Base(sock), ResourceName: resourceName})
	if err != nil {
		return fmt.Errorf("registering with the kubelet: %w", err)
	}
	log.Printf("registered %s: %d HCA(s)", resourceName, len(list))
	<-ctx.Done()
	return nil
}
