package server

import (
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/server/store"
)

func regconfigParseNetwork(doc string) (*store.NetworkTemplate, error) {
	var n store.NetworkTemplate
	err := yaml.Unmarshal([]byte(doc), &n)
	return &n, err
}
