-- An exporter's node label -> the node name Slurm uses: `instance` carries a port, some sites label with
-- the FQDN; Slurm names nodes by the short host name.
CREATE OR REPLACE FUNCTION slurm_node {{on_cluster}} AS (label) ->
    splitByChar('.', replaceRegexpOne(label, ':[0-9]+$', ''))[1];
