package main

// Our device plugin (issue 42, "devices without hardware"): for each extended resource the catalog gives a real
// node (nvidia.com/gpu, vpc.amazonaws.com/efa, rdma/..., as nodes.yaml carries them), a server of the kubelet's
// device-plugin API v1beta1 (k8s.io/kubelet@v0.33.13 pkg/apis/deviceplugin/v1beta1) that lists that many healthy
// devices with fake IDs and registers with the kubelet's Registration service, so the kubelet's device manager
// advertises and allocates them as it would the vendors' plugins. Only the hardware is fake: Allocate hands the
// container an env var naming the fake IDs (no device node, no mount).

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type DevicePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	node, resource string
	count          int
	dir            string // the node's device-plugins folder (kubelet.sock is there)
	Registered     chan struct{}
}

func NewDevicePlugin(node, resource string, count int, dir string) *DevicePlugin {
	return &DevicePlugin{node: node, resource: resource, count: count, dir: dir, Registered: make(chan struct{})}
}

// DeviceIDs are the fake IDs of a resource on a node: box-<resource with / and . as ->-<i>.
func DeviceIDs(resource string, count int) []string {
	base := strings.NewReplacer("/", "-", ".", "-").Replace(resource)
	ids := make([]string, count)
	for i := range ids {
		ids[i] = fmt.Sprintf("box-%s-%d", base, i)
	}
	return ids
}

// DeviceEnv is the env var Allocate sets: MULTINODE_BOX_DEVICES_<RESOURCE> = the allocated fake IDs.
func DeviceEnv(resource string) string {
	r := strings.NewReplacer("/", "_", ".", "_", "-", "_")
	return "MULTINODE_BOX_DEVICES_" + strings.ToUpper(r.Replace(resource))
}

func (p *DevicePlugin) endpoint() string {
	return "box-" + strings.NewReplacer("/", "-", ".", "-").Replace(p.resource) + ".sock"
}

// Run serves and registers once the kubelet's registration socket is there (the device manager empties the
// folder when it starts, so the plugin's socket is made after kubelet.sock).
func (p *DevicePlugin) Run(ctx context.Context, logf func(string, ...any)) {
	kubeletSock := filepath.Join(p.dir, "kubelet.sock")
	for {
		if _, err := os.Stat(kubeletSock); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
	sock := filepath.Join(p.dir, p.endpoint())
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		logf("device plugin %s on %s: %v", p.resource, p.node, err)
		return
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(l) }()
	go func() { <-ctx.Done(); srv.Stop() }()
	if err := waitSocket(sock, 10*time.Second); err != nil {
		logf("device plugin %s on %s: %v", p.resource, p.node, err)
		return
	}
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		logf("device plugin %s on %s: %v", p.resource, p.node, err)
		return
	}
	defer conn.Close()
	for attempt := 0; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = pluginapi.NewRegistrationClient(conn).Register(rctx, &pluginapi.RegisterRequest{
			Version: pluginapi.Version, Endpoint: p.endpoint(), ResourceName: p.resource})
		cancel()
		if err == nil {
			close(p.Registered)
			return
		}
		if attempt == 20 || ctx.Err() != nil {
			logf("device plugin %s on %s: register: %v", p.resource, p.node, err)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (p *DevicePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *DevicePlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	var devs []*pluginapi.Device
	for _, id := range DeviceIDs(p.resource, p.count) {
		devs = append(devs, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
		return err
	}
	<-s.Context().Done() // the list never changes
	return nil
}

func (p *DevicePlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{DeviceEnv(p.resource): strings.Join(c.DevicesIDs, ",")}})
	}
	return resp, nil
}

func (p *DevicePlugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

func (p *DevicePlugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}
