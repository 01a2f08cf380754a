-- A GPU's PCI bus id as the warehouse keys it. The kernel's Xid lines name the GPU `PCI:0000:af:00`
-- (domain:bus:device), dcgm-exporter's pci_bus_id label `00000000:AF:00.0` (NVML: an 8-digit domain and the
-- function), lspci `af:00.0`: all become `0000:af:00` (lowercase, the domain as 4 digits, no function), so
-- the two sources meet (sql/staging/gpu_pci.sql, xid_event_kernel.sql). Text that is no bus id gives ''.
CREATE OR REPLACE FUNCTION pci_bus_key {{on_cluster}} AS (id) ->
    if(match(lower(ifNull(id, '')), '^(pci:)?([0-9a-f]{1,8}:)?[0-9a-f]{2}:[0-9a-f]{2}(\\.[0-7])?$'),
       concat(leftPad(replaceRegexpOne(extract(lower(id), '^(?:pci:)?([0-9a-f]{1,8}):[0-9a-f]{2}:[0-9a-f]{2}'),
                                       '^0+', ''), 4, '0'),
              ':', extract(lower(id), '([0-9a-f]{2}:[0-9a-f]{2})(?:\\.[0-7])?$')),
       '');
