module github.com/intranode/intranode

go 1.26
