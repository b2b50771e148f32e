module github.com/different-ai/differently

go 1.26
