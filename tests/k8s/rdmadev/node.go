// SPDX-License-Identifier: Apache-2.0
package main

// The sample node's HCAs, read from its sysfs tree (the tree tests/mknode.py builds, the
// hook's sysroot): each HCA's name, PCI address and PCIe root, its uverbs node and that
// node's numbers (the node's dev/infiniband/uverbsN, made with mknod).

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

type hca struct {
	Name     string // mlx5_1
	PCI      string // 0000:4b:00.0
	Root     string // pci0000:4a
	Uverbs   string // uverbs1
	HostPath string // <node>/dev/infiniband/uverbs1
	Major    int64
	Minor    int64
}

// readNode: every HCA of the node's sys/class/infiniband that has a uverbs node; where
// ORH_RDMADEV_HCAS is set (a comma list of HCA names, as a device plugin's selector), those
// only
func readNode(node string) ([]hca, error) {
	only := map[string]bool{}
	for _, n := range strings.Split(os.Getenv("ORH_RDMADEV_HCAS"), ",") {
		if n != "" {
			only[n] = true
		}
	}
	verbs := filepath.Join(node, "sys/class/infiniband_verbs")
	ents, err := os.ReadDir(verbs)
	if err != nil {
		return nil, err
	}
	var out []hca
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "uverbs") {
			continue
		}
		ib, err := os.ReadFile(filepath.Join(verbs, e.Name(), "ibdev"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(verbs, e.Name(), "ibdev"), err)
		}
		h := hca{Name: strings.TrimSpace(string(ib)), Uverbs: e.Name(),
			HostPath: filepath.Join(node, "dev/infiniband", e.Name())}
		if len(only) > 0 && !only[h.Name] {
			continue
		}
		dev, err := filepath.EvalSymlinks(filepath.Join(node, "sys/class/infiniband", h.Name, "device"))
		if err != nil {
			return nil, fmt.Errorf("HCA %s: its device: %w", h.Name, err)
		}
		h.PCI = filepath.Base(dev)
		rel, err := filepath.Rel(filepath.Join(node, "sys/devices"), dev)
		if err != nil || strings.HasPrefix(rel, "..") {
			return nil, fmt.Errorf("HCA %s: device %s is not under sys/devices", h.Name, dev)
		}
		h.Root = strings.Split(rel, "/")[0]
		var st syscall.Stat_t
		if err := syscall.Stat(h.HostPath, &st); err != nil {
			return nil, fmt.Errorf("%s: %w", h.HostPath, err)
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFCHR {
			return nil, fmt.Errorf("%s: not a character device", h.HostPath)
		}
		h.Major, h.Minor = int64(st.Rdev>>8&0xfff), int64(st.Rdev&0xff|(st.Rdev>>12)&0xfff00)
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no uverbs node (of ORH_RDMADEV_HCAS %q)", verbs,
			os.Getenv("ORH_RDMADEV_HCAS"))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

type gpu struct {
	PCI      string // 0000:4e:00.0
	Root     string // pci0000:4a
	Minor    int64  // N of /dev/nvidiaN, the driver's (proc/driver/nvidia/gpus/<bdf>/information)
	HostPath string // <node>/dev/nvidiaN
}

// readGPUs: the node's NVIDIA GPUs (sys/bus/pci/devices/<bdf> of vendor 0x10de, class 0x03xxxx,
// that the nvidia driver lists in proc/driver/nvidia/gpus), each with its /dev/nvidiaN node
// (195:N); none is no error
func readGPUs(node string) ([]gpu, error) {
	ents, err := os.ReadDir(filepath.Join(node, "proc/driver/nvidia/gpus"))
	if os.IsNotExist(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var out []gpu
	for _, e := range ents {
		dev := filepath.Join(node, "sys/bus/pci/devices", e.Name())
		vendor, _ := os.ReadFile(filepath.Join(dev, "vendor"))
		class, _ := os.ReadFile(filepath.Join(dev, "class"))
		if strings.TrimSpace(string(vendor)) != "0x10de" || !strings.HasPrefix(string(class), "0x03") {
			continue
		}
		info, err := os.ReadFile(filepath.Join(node, "proc/driver/nvidia/gpus", e.Name(), "information"))
		if err != nil {
			return nil, err
		}
		g := gpu{PCI: e.Name(), Minor: -1}
		for _, l := range strings.Split(string(info), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "Device Minor" {
				fmt.Sscan(strings.TrimSpace(v), &g.Minor)
			}
		}
		if g.Minor < 0 {
			return nil, fmt.Errorf("GPU %s: no Device Minor in its information file", g.PCI)
		}
		real, err := filepath.EvalSymlinks(dev)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(filepath.Join(node, "sys/devices"), real)
		if err != nil || strings.HasPrefix(rel, "..") {
			return nil, fmt.Errorf("GPU %s: not under sys/devices", g.PCI)
		}
		g.Root = strings.Split(rel, "/")[0]
		g.HostPath = filepath.Join(node, "dev", fmt.Sprintf("nvidia%d", g.Minor))
		if _, err := os.Stat(g.HostPath); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PCI < out[j].PCI })
	return out, nil
}
