mkdir announce && cd announce
go mod init example.com/announce
go get github.com/superstep/superstep@latest
# write workflow.go and main.go (below) here, then:
go mod tidy
go build -o announce . && ./announce
