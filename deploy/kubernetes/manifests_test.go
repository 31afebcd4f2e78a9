package kubernetes

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	kyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The manifests are decoded as the API server decodes a request with
// strict field validation: apimachinery's YAML serializer in strict mode,
// into the official types. An unknown or misspelt field (field names are
// case-sensitive), a duplicate key or a value of the wrong type fails, and
// so does a kind the scheme doesn't know.
var (
	scheme = func() *runtime.Scheme {
		s := runtime.NewScheme()
		for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme} {
			if err := add(s); err != nil {
				panic(err)
			}
		}
		return s
	}()
	strictYAML = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
		kjson.SerializerOptions{Yaml: true, Strict: true})
)

// manifests are the objects of every *.yaml file in this directory, by
// kind.
type manifests struct {
	namespaces map[string]*corev1.Namespace
	secrets    []*corev1.Secret
	daemonSets []*appsv1.DaemonSet
	jobs       []*batchv1.Job
	pods       []*corev1.Pod
}

// decodeDocs decodes every YAML document of one file strictly. Documents
// that hold only comments are skipped.
func decodeDocs(name string, data []byte) ([]runtime.Object, error) {
	var objs []runtime.Object
	r := kyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if onlyComments(doc) {
			continue
		}
		obj, gvk, err := strictYAML.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", name, i, err)
		}
		if gvk.Kind == "" || gvk.Version == "" {
			return nil, fmt.Errorf("%s, document %d: no apiVersion or kind", name, i)
		}
		objs = append(objs, obj)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("%s: no document", name)
	}
	return objs, nil
}

func onlyComments(doc []byte) bool {
	for line := range strings.SplitSeq(string(doc), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && line != "---" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}

// sort files the objects by kind; a kind this test doesn't check fails.
func (m *manifests) sort(obj runtime.Object) error {
	switch o := obj.(type) {
	case *corev1.Namespace:
		if m.namespaces[o.Name] != nil {
			return fmt.Errorf("namespace %s declared twice", o.Name)
		}
		m.namespaces[o.Name] = o
	case *corev1.Secret:
		m.secrets = append(m.secrets, o)
	case *appsv1.DaemonSet:
		m.daemonSets = append(m.daemonSets, o)
	case *batchv1.Job:
		m.jobs = append(m.jobs, o)
	case *corev1.Pod:
		m.pods = append(m.pods, o)
	default:
		return fmt.Errorf("kind %T is not one this test checks: add its checks", obj)
	}
	return nil
}

func loadManifests(t *testing.T) *manifests {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	yml, _ := filepath.Glob("*.yml")
	files = append(files, yml...)
	if len(files) == 0 {
		t.Fatal("no manifests (*.yaml) here")
	}
	m := &manifests{namespaces: map[string]*corev1.Namespace{}}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeDocs(f, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if err := m.sort(o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}
	return m
}

// theDaemonSet is the one DaemonSet and its one container.
func (m *manifests) theDaemonSet(t *testing.T) (*appsv1.DaemonSet, *corev1.Container) {
	t.Helper()
	if len(m.daemonSets) != 1 {
		t.Fatalf("%d DaemonSets, want 1", len(m.daemonSets))
	}
	ds := m.daemonSets[0]
	if n := len(ds.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("DaemonSet %s: %d containers, want 1 (dsmount)", ds.Name, n)
	}
	return ds, &ds.Spec.Template.Spec.Containers[0]
}

// consumers are the pod specs of the Jobs and Pods that read the dataset.
func (m *manifests) consumers() map[string]*corev1.PodSpec {
	c := map[string]*corev1.PodSpec{}
	for _, j := range m.jobs {
		c["Job "+j.Name] = &j.Spec.Template.Spec
	}
	for _, p := range m.pods {
		c["Pod "+p.Name] = &p.Spec
	}
	return c
}

// mountOf is the volume mount of c whose mountPath holds p (the deepest),
// its volume, and p as a path on the host when that volume is a hostPath.
func mountOf(spec *corev1.PodSpec, c *corev1.Container, p string) (vm *corev1.VolumeMount, vol *corev1.Volume, hostPath string) {
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		if (p == m.MountPath || strings.HasPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/")) &&
			(vm == nil || len(m.MountPath) > len(vm.MountPath)) {
			vm = m
		}
	}
	if vm == nil {
		return nil, nil, ""
	}
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == vm.Name {
			vol = &spec.Volumes[i]
		}
	}
	if vol != nil && vol.HostPath != nil {
		rel := strings.TrimPrefix(p, vm.MountPath)
		hostPath = path.Join(vol.HostPath.Path, rel)
	}
	return vm, vol, hostPath
}

// deref shows an optional field: its value, or "unset".
func deref[T ~string](p *T) string {
	if p == nil {
		return "unset"
	}
	return string(*p)
}

func envValue(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom == nil {
			return e.Value, true
		}
	}
	return "", false
}

// dsmountArgs is the dsmount command line of the DaemonSet's container:
// its args: dsmount is the command itself, no wrapper.
func dsmountArgs(t *testing.T, c *corev1.Container) []string {
	t.Helper()
	if len(c.Command) != 1 || c.Command[0] != "dsmount" {
		t.Fatalf("command %q: want [dsmount], the container's main process, with no wrapper script", c.Command)
	}
	if len(c.Args) == 0 || c.Args[0] != "mount" {
		t.Fatalf("args %q: want dsmount mount SOURCE MOUNTPOINT", c.Args)
	}
	return c.Args
}

// splitArgs separates flags from positional arguments. A flag that takes a
// value is written --name=value, so that the command line reads the same
// whatever the flag's type; a bare --name is a switch (value "").
func splitArgs(args []string) (flags map[string]string, bare map[string]bool, positional []string) {
	flags, bare = map[string]string{}, map[string]bool{}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		flags[name], bare[name] = value, !hasValue
	}
	return flags, bare, positional
}

func TestManifestsDecodeStrictly(t *testing.T) {
	m := loadManifests(t)
	if len(m.namespaces) == 0 || len(m.secrets) == 0 || len(m.daemonSets) == 0 || len(m.jobs)+len(m.pods) == 0 {
		t.Fatalf("want a Namespace, a Secret, a DaemonSet and a Job or Pod; got %d, %d, %d, %d",
			len(m.namespaces), len(m.secrets), len(m.daemonSets), len(m.jobs)+len(m.pods))
	}
	// Every namespaced object lives in a namespace declared here.
	check := func(kind string, o metav1.Object) {
		if o.GetNamespace() == "" {
			t.Errorf("%s %s: no namespace (it would land in whatever namespace kubectl is pointed at)", kind, o.GetName())
		} else if m.namespaces[o.GetNamespace()] == nil {
			t.Errorf("%s %s: namespace %s is not declared here", kind, o.GetName(), o.GetNamespace())
		}
	}
	for _, o := range m.secrets {
		check("Secret", o)
	}
	for _, o := range m.daemonSets {
		check("DaemonSet", o)
	}
	for _, o := range m.jobs {
		check("Job", o)
	}
	for _, o := range m.pods {
		check("Pod", o)
	}
}

func TestDaemonSet(t *testing.T) {
	m := loadManifests(t)
	ds, c := m.theDaemonSet(t)
	spec := &ds.Spec.Template.Spec

	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || sel.Empty() {
		t.Errorf("selector %v: %v (want a non-empty one)", ds.Spec.Selector, err)
	} else if !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
		t.Errorf("selector %s does not match the pod template's labels %v", sel, ds.Spec.Template.Labels)
	}
	if ns := m.namespaces[ds.Namespace]; ns != nil && ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("namespace %s: pod-security.kubernetes.io/enforce is %q; a privileged pod with hostPath volumes needs \"privileged\"",
			ns.Name, ns.Labels["pod-security.kubernetes.io/enforce"])
	}

	if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
		t.Error("the container is not privileged: FUSE mounts and Bidirectional propagation need it")
	}
	if !spec.HostPID {
		t.Error("hostPID is off: FUSE would name other pods' reading processes as pid 0, and declared orders could not tell jobs apart")
	}

	// /dev/fuse from the host.
	if vm, vol, host := mountOf(spec, c, "/dev/fuse"); vm == nil || vm.MountPath != "/dev/fuse" || host != "/dev/fuse" ||
		vol.HostPath.Type == nil || *vol.HostPath.Type != corev1.HostPathCharDev {
		t.Errorf("/dev/fuse is not the host's /dev/fuse as a hostPath of type CharDevice (the container's /dev/fuse is the host's %q)", host)
	}

	// The cache on a host directory.
	cacheDir, ok := envValue(c, "DSMOUNT_CACHE_DIR")
	if !ok {
		t.Fatal("no DSMOUNT_CACHE_DIR: the cache dir would be the container's home, lost with it")
	}
	_, cacheVol, cacheHost := mountOf(spec, c, cacheDir)
	if cacheHost == "" {
		t.Fatalf("DSMOUNT_CACHE_DIR %s is on no hostPath volume", cacheDir)
	}
	if ty := cacheVol.HostPath.Type; ty == nil || (*ty != corev1.HostPathDirectoryOrCreate && *ty != corev1.HostPathDirectory) {
		t.Errorf("cache volume %s: hostPath type %s, want DirectoryOrCreate or Directory", cacheVol.Name, deref(ty))
	}

	// The mount under a host directory, propagated back to the host.
	args := dsmountArgs(t, c)
	_, _, positional := splitArgs(args[1:]) // the flags: TestCommandLineIsTheCLIs
	if len(positional) != 2 {
		t.Fatalf("args %q: want 2 positional arguments, SOURCE and MOUNTPOINT", args)
	}
	source, mp := positional[0], positional[1]
	if flags, bare, _ := splitArgs(args[1:]); !bare["mkdir"] || flags["mkdir"] != "" {
		t.Errorf("args %q: want --mkdir, so that the mountpoint below the host directory is made", args)
	}
	if !regexp.MustCompile(`^s3://[a-z0-9][a-z0-9.-]*[a-z0-9](/.*)?$`).MatchString(source) && !path.IsAbs(source) {
		t.Errorf("source %q: want s3://BUCKET[/PREFIX] or an absolute path", source)
	}
	if !path.IsAbs(mp) || path.Clean(mp) != mp {
		t.Errorf("mountpoint %q: want a clean absolute path", mp)
	}
	vm, vol, mpHost := mountOf(spec, c, mp)
	switch {
	case vm == nil || mpHost == "":
		t.Errorf("mountpoint %s is on no hostPath volume: no pod but this one would see the mount", mp)
	case vm.MountPath == mp:
		t.Errorf("the mountpoint %s is the volume's root: mount a directory below it, so the mount root stays a plain directory", mp)
	case vm.MountPropagation == nil || *vm.MountPropagation != corev1.MountPropagationBidirectional:
		t.Errorf("volume mount %s: mountPropagation %s, want Bidirectional (the mount must reach the host)", vm.MountPath, deref(vm.MountPropagation))
	case vol.HostPath.Type == nil || *vol.HostPath.Type != corev1.HostPathDirectoryOrCreate:
		t.Errorf("volume %s: hostPath type %s, want DirectoryOrCreate", vol.Name, deref(vol.HostPath.Type))
	}
	if cacheHost == mpHost || strings.HasPrefix(cacheHost+"/", mpHost+"/") || strings.HasPrefix(mpHost+"/", cacheHost+"/") {
		t.Errorf("the cache (%s on the host) and the mount (%s) overlap", cacheHost, mpHost)
	}

	// Ready once the mount answers.
	p := c.ReadinessProbe
	if p == nil || p.Exec == nil {
		t.Error("no exec readiness probe")
	} else if want := []string{"dsmount", "stats", mp}; !slices.Equal(p.Exec.Command, want) &&
		!(len(p.Exec.Command) > 0 && slices.Contains(p.Exec.Command, path.Join(mp, ".dsmount-control"))) {
		t.Errorf("readiness probe %q: want %q or a check of %s", p.Exec.Command, want, path.Join(mp, ".dsmount-control"))
	}

	// A clean stop: SIGTERM unmounts; leave it the time to.
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g < 30 {
		t.Errorf("terminationGracePeriodSeconds %v: want at least 30", g)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		t.Log("a preStop hook is set: dsmount unmounts on SIGTERM by itself")
	}

	// Resources: requests, and no CPU limit (a throttled FUSE server stalls
	// every reader on the node).
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
			t.Errorf("no %s request", r)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Error("a CPU limit: a throttled FUSE server stalls every reader on the node")
	}

	// Metrics: listening beyond loopback, on the declared port, scraped.
	addr, ok := envValue(c, "DSMOUNT_METRICS_ADDR")
	if !ok {
		t.Fatal("no DSMOUNT_METRICS_ADDR")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("DSMOUNT_METRICS_ADDR %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || host == "localhost" || (ip != nil && ip.IsLoopback()) {
		t.Errorf("DSMOUNT_METRICS_ADDR %q listens on loopback only (\":PORT\" means 127.0.0.1): Prometheus could not scrape it", addr)
	}
	var declared bool
	for _, cp := range c.Ports {
		declared = declared || (strconv.Itoa(int(cp.ContainerPort)) == port && cp.Name == "metrics")
	}
	if !declared {
		t.Errorf("no containerPort named metrics for port %s", port)
	}
	ann := ds.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != port || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("scrape annotations %v: want prometheus.io/scrape \"true\", port %q, path /metrics", ann, port)
	}

	// S3 credentials from the Secret.
	var fromSecret bool
	for _, ef := range c.EnvFrom {
		if ef.SecretRef == nil {
			continue
		}
		fromSecret = true
		if ef.SecretRef.Optional != nil && *ef.SecretRef.Optional {
			t.Errorf("envFrom secret %s is optional: without it the daemon starts with no credentials", ef.SecretRef.Name)
		}
		s := m.secret(ds.Namespace, ef.SecretRef.Name)
		if s == nil {
			t.Errorf("envFrom secret %s is not declared in namespace %s", ef.SecretRef.Name, ds.Namespace)
			continue
		}
		for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL_S3"} {
			if _, ok := s.StringData[k]; !ok {
				t.Errorf("secret %s has no %s", s.Name, k)
			}
		}
	}
	if !fromSecret {
		t.Error("no envFrom secretRef: the S3 credentials come from a Secret")
	}
}

func (m *manifests) secret(namespace, name string) *corev1.Secret {
	for _, s := range m.secrets {
		if s.Namespace == namespace && s.Name == name {
			return s
		}
	}
	return nil
}

// TestSecretsArePlaceholders keeps real credentials out of the example.
func TestSecretsArePlaceholders(t *testing.T) {
	m := loadManifests(t)
	for _, s := range m.secrets {
		if len(s.Data) > 0 {
			t.Errorf("secret %s: data (base64) hides what it holds; use stringData with placeholders", s.Name)
		}
		for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
			if v, ok := s.StringData[k]; ok && v != "REPLACE_ME" {
				t.Errorf("secret %s: %s is %q, want the placeholder REPLACE_ME", s.Name, k, v)
			}
		}
	}
}

// TestConsumersSeeTheMount checks the training pods: on the same host path
// as the DaemonSet's mount root, with HostToContainer propagation, on nodes
// that run dsmount, and reading the dataset the DaemonSet mounts.
func TestConsumersSeeTheMount(t *testing.T) {
	m := loadManifests(t)
	ds, dc := m.theDaemonSet(t)
	dspec := &ds.Spec.Template.Spec
	args := dsmountArgs(t, dc)
	_, _, positional := splitArgs(args[1:])
	if len(positional) != 2 {
		t.Fatalf("DaemonSet args %q", args)
	}
	_, dvol, mpHost := mountOf(dspec, dc, positional[1])
	if dvol == nil || dvol.HostPath == nil {
		t.Fatal("the DaemonSet's mountpoint is on no hostPath volume")
	}
	root := dvol.HostPath.Path

	for _, j := range m.jobs {
		if rp := j.Spec.Template.Spec.RestartPolicy; rp != corev1.RestartPolicyNever && rp != corev1.RestartPolicyOnFailure {
			t.Errorf("Job %s: restartPolicy %q, want Never or OnFailure", j.Name, rp)
		}
	}
	for name, spec := range m.consumers() {
		for k, v := range dspec.NodeSelector {
			if spec.NodeSelector[k] != v {
				t.Errorf("%s: nodeSelector %v does not require %s=%s: it could land on a node without dsmount", name, spec.NodeSelector, k, v)
			}
		}
		for _, tol := range spec.Tolerations {
			if !slices.ContainsFunc(dspec.Tolerations, func(d corev1.Toleration) bool {
				return d.Key == tol.Key && d.Effect == tol.Effect && (d.Operator == corev1.TolerationOpExists || d.Value == tol.Value)
			}) {
				t.Errorf("%s: tolerates %s, the DaemonSet doesn't: it could land on a node without dsmount", name, tol.Key)
			}
		}
		var seen bool
		for i := range spec.Containers {
			c := &spec.Containers[i]
			if sc := c.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
				t.Errorf("%s, container %s: privileged; a reader needs no privilege", name, c.Name)
			}
			for _, vm := range c.VolumeMounts {
				_, vol, _ := mountOf(spec, c, vm.MountPath)
				if vol == nil || vol.HostPath == nil || vol.HostPath.Path != root {
					continue
				}
				seen = true
				if vm.MountPropagation == nil || *vm.MountPropagation != corev1.MountPropagationHostToContainer {
					t.Errorf("%s, container %s: %s (host %s) has mountPropagation %s, want HostToContainer (a mount made after the pod started would not show)",
						name, c.Name, vm.MountPath, root, deref(vm.MountPropagation))
				}
			}
			if dataset, ok := envValue(c, "DATASET"); ok {
				if _, _, h := mountOf(spec, c, dataset); h != mpHost {
					t.Errorf("%s, container %s: DATASET %s is %q on the host, want the DaemonSet's mount %s", name, c.Name, dataset, h, mpHost)
				}
			}
		}
		if !seen {
			t.Errorf("%s: no container mounts the host's %s (the DaemonSet's mount root)", name, root)
		}
	}
}
