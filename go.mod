module github.com/different-ai/differently

go 1.26

require github.com/oklog/ulid/v2 v2.1.1
