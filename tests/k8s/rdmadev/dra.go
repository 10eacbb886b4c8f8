// SPDX-License-Identifier: Apache-2.0
package main

// A DRA driver, rdma.orh.test, through k8s.io/dynamic-resource-allocation's kubeletplugin
// helper: the node's HCAs and GPUs as the devices of one resource.k8s.io/v1 ResourceSlice
// (pool "localhost"), HCAs named mlx5-N with the driver's own attribute hca (the HCA's
// name), GPUs named gpu-DDDD-BB-DD-F with its attribute gpu (the PCI address), each with
// the standard attributes resource.kubernetes.io/pciBusID and resource.kubernetes.io/
// pcieRoot. A claim is prepared as the RDMA and GPU DRA drivers do: one CDI spec per claim
// in CDI-DIR, a device per allocated HCA (its uverbs node) or GPU (its /dev/nvidiaN), and
// for each request the KEP-5304 device metadata file, mounted read-only by the request's
// first device at /var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/
// <request>/<driver>-metadata.json (resourceclaimtemplates/<pod's claim name>/... for a
// claim made from a template): a stream of one DeviceMetadata object per version,
// metadata.resource.k8s.io/v1beta1 then v1alpha1, each device with its attributes.
// Unprepare removes both.

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

const (
	driverName   = "rdma.orh.test"
	metadataRoot = "/var/run/kubernetes.io/dra-device-attributes"
	podClaimKey  = "resource.kubernetes.io/pod-claim-name"
)

type draDriver struct {
	hcas    map[string]hca // by device name (mlx5-1)
	gpus    map[string]gpu // by device name (gpu-0000-4e-00-0)
	cdiDir  string
	dataDir string
}

func gpuName(g gpu) string { return "gpu-" + strings.NewReplacer(":", "-", ".", "-").Replace(g.PCI) }

func (g gpu) attributes() map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	return map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"resource.kubernetes.io/pciBusID": str(g.PCI),
		"resource.kubernetes.io/pcieRoot": str(g.Root),
		"gpu":                             str(g.PCI),
	}
}

// edits: a device's CDI node and its attributes, by its name
func (d *draDriver) device(name string) (map[string]any, map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, bool) {
	if h, ok := d.hcas[name]; ok {
		return map[string]any{"path": "/dev/infiniband/" + h.Uverbs, "hostPath": h.HostPath,
			"type": "c", "major": h.Major, "minor": h.Minor, "permissions": "rw"}, h.attributes(), true
	}
	if g, ok := d.gpus[name]; ok {
		return map[string]any{"path": fmt.Sprintf("/dev/nvidia%d", g.Minor), "hostPath": g.HostPath,
			"type": "c", "major": 195, "minor": g.Minor, "permissions": "rw"}, g.attributes(), true
	}
	return nil, nil, false
}

func deviceName(h hca) string { return strings.ReplaceAll(h.Name, "_", "-") }

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

func (h hca) attributes() map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	return map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"resource.kubernetes.io/pciBusID": str(h.PCI),
		"resource.kubernetes.io/pcieRoot": str(h.Root),
		"hca":                             str(h.Name),
	}
}

func (d *draDriver) prepare(claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	var res kubeletplugin.PrepareResult
	if claim.Status.Allocation == nil {
		res.Err = fmt.Errorf("claim %s/%s: not allocated", claim.Namespace, claim.Name)
		return res
	}
	dir := filepath.Join(d.dataDir, string(claim.UID))
	byRequest := map[string][]map[string]any{}
	var results []resourceapi.DeviceRequestAllocationResult
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != driverName {
			continue
		}
		_, devAttrs, ok := d.device(r.Device)
		if !ok {
			res.Err = fmt.Errorf("claim %s/%s: no device %q on this node", claim.Namespace, claim.Name, r.Device)
			return res
		}
		attrs := map[string]any{}
		for k, v := range devAttrs {
			attrs[string(k)] = map[string]string{"string": *v.StringValue}
		}
		byRequest[r.Request] = append(byRequest[r.Request], map[string]any{
			"name": r.Device, "driver": r.Driver, "pool": r.Pool, "attributes": attrs})
		results = append(results, r)
	}
	// the metadata files, one per request, and where each is mounted in the container
	mounts := map[string]map[string]any{}
	for req, devs := range byRequest {
		where := filepath.Join(metadataRoot, "resourceclaims", claim.Name)
		pc := claim.Annotations[podClaimKey]
		if pc != "" {
			where = filepath.Join(metadataRoot, "resourceclaimtemplates", pc)
		}
		var stream []byte
		for _, v := range []string{"v1beta1", "v1alpha1"} {
			md := map[string]any{
				"apiVersion": "metadata.resource.k8s.io/" + v, "kind": "DeviceMetadata",
				"metadata": map[string]any{"name": claim.Name, "namespace": claim.Namespace,
					"uid": string(claim.UID), "generation": 1},
				"requests": []any{map[string]any{"name": req, "devices": devs}},
			}
			if pc != "" && v == "v1beta1" {
				md["podClaimName"] = pc
			}
			b, _ := json.MarshalIndent(md, "", "  ")
			stream = append(append(stream, b...), '\n')
		}
		host := filepath.Join(dir, req+".json")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			res.Err = err
			return res
		}
		if err := os.WriteFile(host, stream, 0o644); err != nil {
			res.Err = err
			return res
		}
		mounts[req] = map[string]any{"hostPath": host,
			"containerPath": filepath.Join(where, req, driverName+"-metadata.json"),
			"options":       []string{"ro", "bind"}}
	}
	var cdiDevs []any
	for _, r := range results {
		node, _, _ := d.device(r.Device)
		name := string(claim.UID) + "-" + r.Device
		edits := map[string]any{"deviceNodes": []any{node}}
		// the request's metadata file, mounted once: by its first device
		if m, ok := mounts[r.Request]; ok {
			edits["mounts"] = []any{m}
			delete(mounts, r.Request)
		}
		cdiDevs = append(cdiDevs, map[string]any{"name": name, "containerEdits": edits})
		res.Devices = append(res.Devices, kubeletplugin.Device{Requests: []string{r.Request},
			PoolName: r.Pool, DeviceName: r.Device,
			CDIDeviceIDs: []string{driverName + "/hca=" + name}})
		log.Printf("prepared claim %s/%s: %s (%s) for request %s", claim.Namespace, claim.Name,
			r.Device, node["hostPath"], r.Request)
	}
	spec := map[string]any{"cdiVersion": "0.6.0", "kind": driverName + "/hca", "devices": cdiDevs}
	b, _ := json.MarshalIndent(spec, "", "  ")
	if err := os.WriteFile(d.cdiFile(claim.UID), append(b, '\n'), 0o644); err != nil {
		res.Err = err
	}
	return res
}

func (d *draDriver) cdiFile(uid types.UID) string {
	return filepath.Join(d.cdiDir, "orh-rdma-"+string(uid)+".json")
}

func (d *draDriver) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, c := range claims {
		out[c.UID] = d.prepare(c)
	}
	return out, nil
}

func (d *draDriver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := map[types.UID]error{}
	for _, c := range claims {
		err := os.Remove(d.cdiFile(c.UID))
		if os.IsNotExist(err) {
			err = nil
		}
		if e := os.RemoveAll(filepath.Join(d.dataDir, string(c.UID))); err == nil {
			err = e
		}
		out[c.UID] = err
		log.Printf("unprepared claim %s", c.UID)
	}
	return out, nil
}

func (d *draDriver) HandleError(_ context.Context, err error, msg string) {
	log.Printf("%s: %v", msg, err)
}

func runDRA(ctx context.Context, node, kubeletRoot, cdiDir, kubeconfig string) error {
	list, err := readNode(node)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	gpus, err := readGPUs(node)
	if err != nil {
		return err
	}
	d := &draDriver{hcas: map[string]hca{}, gpus: map[string]gpu{}, cdiDir: cdiDir,
		dataDir: filepath.Join(kubeletRoot, "plugins", driverName, "metadata")}
	var devs []resourceapi.Device
	for _, h := range list {
		d.hcas[deviceName(h)] = h
		devs = append(devs, resourceapi.Device{Name: deviceName(h), Attributes: h.attributes()})
	}
	for _, g := range gpus {
		d.gpus[gpuName(g)] = g
		devs = append(devs, resourceapi.Device{Name: gpuName(g), Attributes: g.attributes()})
	}
	for _, dir := range []string{cdiDir, d.dataDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	helper, err := kubeletplugin.Start(ctx, d, kubeletplugin.KubeClient(cs),
		kubeletplugin.DriverName(driverName), kubeletplugin.NodeName("localhost"),
		kubeletplugin.PluginDataDirectoryPath(filepath.Join(kubeletRoot, "plugins", driverName)),
		kubeletplugin.RegistrarDirectoryPath(filepath.Join(kubeletRoot, "plugins_registry")))
	if err != nil {
		return err
	}
	defer helper.Stop()
	err = helper.PublishResources(ctx, resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		"localhost": {Slices: []resourceslice.Slice{{Devices: devs}}}}})
	if err != nil {
		return err
	}
	log.Printf("driver %s: published %d device(s)", driverName, len(devs))
	<-ctx.Done()
	return nil
}
