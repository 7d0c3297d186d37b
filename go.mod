module github.com/intranode/intranode

go 1.26.0

require (
	github.com/NVIDIA/go-nvml v0.13.3-1
	github.com/stretchr/testify v1.12.1
	golang.org/x/sys v0.49.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
