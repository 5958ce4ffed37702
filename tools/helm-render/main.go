// helm-render renders a Helm v3 chart (apiVersion v2) to Kubernetes manifests the way
// `helm template` does, for charts that keep to the template functions listed in
// docs/operations.md ("How the chart is rendered in tests"). There is no helm binary on the
// build machines and Helm's own Go module cannot be fetched there, so this program rebuilds the
// parts of Helm's engine the chart relies on from the same libraries Helm uses, as Debian ships
// them:
//
//   - Go's text/template with Sprig's function map (Masterminds/sprig v3), minus env/expandenv,
//     plus Helm's own include, tpl, required, toYaml, fromYaml, toJson, fromJson, lookup;
//     missingkey=zero and "<no value>" removed from the output (Helm's default), or
//     missingkey=error with --strict (what `helm lint --strict` renders with);
//   - values read with sigs.k8s.io/yaml (numbers become float64, as in Helm), user files
//     coalesced over the chart's values.yaml (maps merged, null deletes a key);
//   - the coalesced values validated against values.schema.json with xeipuuv/gojsonschema,
//     the JSON Schema library Helm 3 used through 3.17; a failure stops the render;
//   - .Release, .Chart, .Capabilities, .Template and .Files.Get like `helm template`;
//   - every rendered document must parse as YAML and name apiVersion and kind; documents are
//     printed in Helm's install order with "# Source:" lines.
//
// usage: helm-render [--release NAME] [--namespace NS] [-f VALUES.yaml]... [--strict]
//                    [--kube-version v1.30.0] [--api-versions GROUP/VERSION]... [--notes] CHART
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/semver/v3"
	"github.com/Masterminds/sprig/v3"
	"github.com/xeipuuv/gojsonschema"
	"sigs.k8s.io/yaml"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// files is .Files: the chart's files outside templates/ (Helm's chart.Files).
type files map[string][]byte

func (f files) Get(name string) string { return string(f[name]) }
func (f files) GetBytes(name string) []byte {
	return f[name]
}

// apiVersions is .Capabilities.APIVersions.
type apiVersions []string

func (a apiVersions) Has(v string) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

// The group versions a plain `helm template` reports (no cluster), for the kinds we use.
var builtinAPIVersions = []string{
	"v1", "apps/v1", "batch/v1", "policy/v1", "rbac.authorization.k8s.io/v1",
	"networking.k8s.io/v1", "storage.k8s.io/v1", "autoscaling/v2", "coordination.k8s.io/v1",
	"apiextensions.k8s.io/v1", "scheduling.k8s.io/v1", "node.k8s.io/v1",
}

// Helm's install order (kinds not listed go last, in name order).
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
	"PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
	"ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
	"CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
	"ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
	"DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
	"APIService",
}

var chartMetadataKeys = map[string]string{ // Chart.yaml key -> .Chart field (Helm's Metadata)
	"apiVersion": "APIVersion", "name": "Name", "version": "Version", "kubeVersion": "KubeVersion",
	"description": "Description", "type": "Type", "keywords": "Keywords", "home": "Home",
	"sources": "Sources", "dependencies": "Dependencies", "maintainers": "Maintainers",
	"icon": "Icon", "appVersion": "AppVersion", "deprecated": "Deprecated",
	"annotations": "Annotations", "condition": "Condition", "tags": "Tags",
}

type chart struct {
	dir       string
	meta      map[string]interface{} // .Chart
	name      string
	values    map[string]interface{}
	schema    []byte
	templates map[string]string // "NAME/templates/x.yaml" -> text
	files     files
}

func readYAMLMap(file string) (map[string]interface{}, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	m := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	if m == nil { // an empty file
		m = map[string]interface{}{}
	}
	return m, nil
}

func loadChart(dir string) (*chart, error) {
	c := &chart{dir: dir, templates: map[string]string{}, files: files{}}
	raw, err := readYAMLMap(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	c.meta = map[string]interface{}{}
	for k, v := range raw {
		field, ok := chartMetadataKeys[k]
		if !ok {
			return nil, fmt.Errorf("Chart.yaml: unknown field %q", k)
		}
		c.meta[field] = v
	}
	if c.meta["APIVersion"] != "v2" {
		return nil, fmt.Errorf("Chart.yaml: apiVersion must be v2, got %v", c.meta["APIVersion"])
	}
	name, _ := c.meta["Name"].(string)
	if name == "" {
		return nil, errors.New("Chart.yaml: name is required")
	}
	c.name = name
	version, _ := c.meta["Version"].(string)
	if _, err := semver.StrictNewVersion(version); err != nil {
		return nil, fmt.Errorf("Chart.yaml: version %q is not SemVer 2: %v", version, err)
	}
	if t, ok := c.meta["Type"]; ok && t != "application" && t != "library" {
		return nil, fmt.Errorf("Chart.yaml: type must be application or library, got %v", t)
	}
	if c.values, err = readYAMLMap(filepath.Join(dir, "values.yaml")); err != nil {
		return nil, err
	}
	if s, err := os.ReadFile(filepath.Join(dir, "values.schema.json")); err == nil {
		c.schema = s
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(path.Base(rel), ".") && rel != "." { // hidden: .helmignore etc.
			if info.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if info.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(rel, "templates/"):
			c.templates[name+"/"+rel] = string(data)
		case rel == "Chart.yaml" || rel == "values.yaml" || rel == "values.schema.json":
		default:
			c.files[rel] = data
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// coalesce overlays src (user values) on dst (defaults), like Helm's CoalesceValues: maps
// merge, other values replace, and a null in src deletes the key.
func coalesce(dst, src map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range dst {
		out[k] = v
	}
	for k, v := range src {
		if v == nil {
			delete(out, k)
			continue
		}
		sm, sok := v.(map[string]interface{})
		dm, dok := out[k].(map[string]interface{})
		if sok && dok {
			out[k] = coalesce(dm, sm)
		} else {
			out[k] = v
		}
	}
	return out
}

func validateValues(c *chart, values map[string]interface{}) error {
	if c.schema == nil {
		return nil
	}
	doc, err := json.Marshal(values)
	if err != nil {
		return err
	}
	result, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(c.schema),
		gojsonschema.NewBytesLoader(doc))
	if err != nil {
		return fmt.Errorf("values.schema.json: %v", err)
	}
	if result.Valid() {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "values don't meet the specifications of the schema(s) in the following chart(s):\n%s:\n", c.name)
	for _, e := range result.Errors() {
		fmt.Fprintf(&b, "- %s\n", e)
	}
	return errors.New(strings.TrimSuffix(b.String(), "\n"))
}

func toYAML(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return "" // Helm swallows the error the same way
	}
	return strings.TrimSuffix(string(data), "\n")
}

func fromYAML(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func fromJSON(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

type renderer struct {
	tpl      *template.Template
	strict   bool
	maxDepth int
}

func (r *renderer) funcs() template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	depth := 0
	f["toYaml"] = toYAML
	f["fromYaml"] = fromYAML
	f["toJson"] = toJSON
	f["fromJson"] = fromJSON
	f["include"] = func(name string, data interface{}) (string, error) {
		depth++
		defer func() { depth-- }()
		if depth > r.maxDepth {
			return "", fmt.Errorf("rendering template has a nested reference name: %s", name)
		}
		var buf bytes.Buffer
		if err := r.tpl.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	f["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := r.tpl.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", fmt.Errorf("cannot parse template %q: %v", text, err)
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return "", err
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	f["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return v, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return v, errors.New(msg)
		}
		return v, nil
	}
	f["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil // `helm template` has no cluster to look in
	}
	return f
}

var docSplit = regexp.MustCompile(`(?:^|\s*\n)---\s*`)

type manifest struct {
	source, kind, name, body string
}

func kindRank(kind string) int {
	for i, k := range installOrder {
		if k == kind {
			return i
		}
	}
	return len(installOrder)
}

func run() error {
	var valueFiles, extraAPIs stringList
	release := flag.String("release", "release-name", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	strict := flag.Bool("strict", false, "fail on a reference to a missing value (helm lint --strict)")
	kubeVersion := flag.String("kube-version", "v1.30.0", "reported .Capabilities.KubeVersion")
	notes := flag.Bool("notes", false, "print the rendered NOTES.txt instead of the manifests")
	flag.Var(&valueFiles, "f", "values file (repeatable; later files win)")
	flag.Var(&extraAPIs, "api-versions", "extra .Capabilities.APIVersions entry (repeatable)")
	flag.Parse()
	if flag.NArg() != 1 {
		return errors.New("usage: helm-render [flags] CHART_DIR")
	}
	c, err := loadChart(flag.Arg(0))
	if err != nil {
		return err
	}
	values := c.values
	for _, f := range valueFiles {
		user, err := readYAMLMap(f)
		if err != nil {
			return err
		}
		values = coalesce(values, user)
	}
	if err := validateValues(c, values); err != nil {
		return err
	}
	kv, err := semver.NewVersion(*kubeVersion)
	if err != nil {
		return fmt.Errorf("--kube-version: %v", err)
	}
	if kc, ok := c.meta["KubeVersion"].(string); ok && kc != "" {
		constraint, err := semver.NewConstraint(kc)
		if err != nil {
			return fmt.Errorf("Chart.yaml: kubeVersion %q: %v", kc, err)
		}
		if !constraint.Check(kv) {
			return fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", kc, *kubeVersion)
		}
	}
	top := map[string]interface{}{
		"Values": values,
		"Chart":  c.meta,
		"Release": map[string]interface{}{
			"Name": *release, "Namespace": *namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Capabilities": map[string]interface{}{
			"KubeVersion": map[string]interface{}{
				"Version": "v" + kv.String(), "GitVersion": "v" + kv.String(),
				"Major": fmt.Sprint(kv.Major()), "Minor": fmt.Sprint(kv.Minor()),
			},
			"APIVersions": append(apiVersions(builtinAPIVersions), extraAPIs...),
		},
		"Files": c.files,
	}

	r := &renderer{strict: *strict, maxDepth: 1000}
	r.tpl = template.New("gotpl")
	if *strict {
		r.tpl.Option("missingkey=error")
	} else {
		r.tpl.Option("missingkey=zero")
	}
	r.tpl.Funcs(r.funcs())
	names := make([]string, 0, len(c.templates))
	for n := range c.templates {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, err := r.tpl.New(n).Parse(c.templates[n]); err != nil {
			return fmt.Errorf("parse error in %q: %v", n, err)
		}
	}
	var out []manifest
	notesText, haveNotes := "", false
	for _, n := range names {
		base := path.Base(n)
		if strings.HasPrefix(base, "_") {
			continue // partials: only their defines are used
		}
		isNotes := base == "NOTES.txt" // rendered either way, so that its errors show
		vals := map[string]interface{}{}
		for k, v := range top {
			vals[k] = v
		}
		vals["Template"] = map[string]interface{}{"Name": n, "BasePath": c.name + "/templates"}
		var buf bytes.Buffer
		if err := r.tpl.ExecuteTemplate(&buf, n, vals); err != nil {
			return fmt.Errorf("render error in %q: %v", n, err)
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if isNotes {
			notesText, haveNotes = text, true
			continue
		}
		if !strings.HasSuffix(n, ".yaml") && !strings.HasSuffix(n, ".yml") && !strings.HasSuffix(n, ".tpl") {
			continue // Helm only installs YAML (and .tpl) files
		}
		for _, doc := range docSplit.Split(text, -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				return fmt.Errorf("YAML parse error on %s: %v", n, err)
			}
			if head.APIVersion == "" || head.Kind == "" {
				return fmt.Errorf("%s: a document without apiVersion or kind:\n%s", n, doc)
			}
			out = append(out, manifest{source: n, kind: head.Kind, name: head.Metadata.Name,
				body: strings.TrimSpace(doc)})
		}
	}
	if *notes {
		if !haveNotes {
			return errors.New("the chart has no templates/NOTES.txt")
		}
		fmt.Print(notesText)
		return nil
	}
	sort.SliceStable(out, func(i, j int) bool {
		ri, rj := kindRank(out[i].kind), kindRank(out[j].kind)
		if ri != rj {
			return ri < rj
		}
		if ri == len(installOrder) && out[i].kind != out[j].kind {
			return out[i].kind < out[j].kind
		}
		return out[i].name < out[j].name
	})
	for _, m := range out {
		fmt.Printf("---\n# Source: %s\n%s\n", m.source, m.body)
	}
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
