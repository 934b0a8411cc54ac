package inventory

import (
	"encoding/json"
	"fmt"
)

// DumpDocument is what `agent inventory` prints: everything the agent would
// send about the machine, and nothing it authenticates with (no token, no
// key; the registration URL and CA are not part of it either).
type DumpDocument struct {
	SMBIOS       map[string]any    `json:"smbios"`
	SystemDataV2 map[string]any    `json:"systemData"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	Degraded     []string          `json:"degraded,omitempty"`
}

// Dump renders inv, labels and annotations as one indented JSON document.
func Dump(inv *Inventory, labels, annotations map[string]string) ([]byte, error) {
	d := DumpDocument{SMBIOS: map[string]any{}, SystemDataV2: map[string]any{}, Labels: labels, Annotations: annotations}
	if inv != nil {
		if inv.SMBIOS != nil {
			d.SMBIOS = inv.SMBIOS
		}
		if inv.SystemDataV2 != nil {
			d.SystemDataV2 = inv.SystemDataV2
		}
		d.Degraded = inv.Degraded
	}
	if d.Labels == nil {
		d.Labels = map[string]string{}
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("inventory dump: %w", err)
	}
	return append(b, '\n'), nil
}
