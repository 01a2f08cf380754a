-- MIG GPU instances' samples -> gpu_instance_sample rows of the window [from_ts, to_ts)
-- (sql/migrations/0019_gpu_instances.sql). {{input}} is the instance series (those with GPU_I_ID) renamed by
-- the metric catalog (etl/telemetry_insert.py): node, gpu, gpu_instance, profile, ts, uuid, hpc_job and the
-- instance's gauges. No counters: energy and NVLink are the physical GPU's (gpu_sample).
INSERT INTO gpu_instance_sample (cluster, node, gpu, gpu_instance, ts, step_s, profile, uuid, hpc_job,
    gr_engine_active, sm_active, tensor_active, dram_active, fb_used_mib, fb_free_mib, source)
SELECT {cluster:String}, node, gpu, gpu_instance, ts, {step_s:UInt32}, profile, uuid, hpc_job,
    gr_engine_active, sm_active, tensor_active, dram_active, fb_used_mib, fb_free_mib, {source:String}
FROM ({{input}})
WHERE ts >= {from_ts:DateTime('UTC')} AND ts < {to_ts:DateTime('UTC')} AND node != '';
