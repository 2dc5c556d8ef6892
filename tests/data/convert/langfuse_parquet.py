#!/usr/bin/env python3
"""Writes blob_export_{observations,traces}.parquet from the JSONL blob
export files beside this script, as Langfuse's blob-storage integration
writes Parquet: ClickHouse's own `FORMAT Parquet` of the export query
(observations with latency and time_to_first_token in seconds, computed in
the query), over tables with Langfuse's ClickHouse column types.

ClickHouse runs in process through chdb (pip install chdb). The .parquet
files are committed; this is how they were made, not a test step.
"""
import os
import chdb
from chdb.session import Session

here = os.path.dirname(os.path.abspath(__file__))
obs_jsonl = os.path.join(here, "blob_export_observations.constructed.jsonl")
traces_jsonl = os.path.join(here, "blob_export_traces.constructed.jsonl")

s = Session()
s.query("SET session_timezone = 'UTC'")
s.query("CREATE DATABASE IF NOT EXISTS lf")
s.query("""
CREATE TABLE lf.observations (
    id String, trace_id String, project_id String,
    environment LowCardinality(String) DEFAULT 'default',
    type LowCardinality(String), parent_observation_id Nullable(String),
    start_time DateTime64(3), end_time Nullable(DateTime64(3)), name String,
    metadata Map(LowCardinality(String), String), level LowCardinality(String),
    status_message Nullable(String), version Nullable(String),
    input Nullable(String), output Nullable(String),
    provided_model_name Nullable(String), internal_model_id Nullable(String),
    model_parameters Nullable(String),
    usage_details Map(LowCardinality(String), UInt64),
    cost_details Map(LowCardinality(String), Decimal64(12)),
    total_cost Nullable(Decimal64(12)),
    completion_start_time Nullable(DateTime64(3)),
    prompt_id Nullable(String), prompt_name Nullable(String),
    prompt_version Nullable(UInt16),
    created_at DateTime64(3), updated_at DateTime64(3),
    tool_calls Array(String), tool_call_names Array(String),
    tool_definitions Map(String, String),
    usage_pricing_tier_name Nullable(String)
) ENGINE = MergeTree ORDER BY (project_id, type, id)
""")
s.query(f"""
INSERT INTO lf.observations
SELECT id, trace_id, project_id, environment, type, parent_observation_id,
       start_time, end_time, name, metadata, level, status_message, version,
       input, output, provided_model_name, model_id, model_parameters,
       usage_details, cost_details, total_cost, completion_start_time,
       prompt_id, prompt_name, prompt_version, created_at, updated_at,
       tool_calls, tool_call_names, tool_definitions, usage_pricing_tier_name
FROM file('{obs_jsonl}', 'JSONEachRow')
SETTINGS input_format_json_read_objects_as_strings = 1
""")
s.query("""
CREATE TABLE lf.traces (
    id String, timestamp DateTime64(3), name String,
    environment LowCardinality(String), project_id String,
    metadata Map(LowCardinality(String), String), user_id Nullable(String),
    session_id Nullable(String), release Nullable(String),
    version Nullable(String), public Bool, bookmarked Bool,
    tags Array(String), input Nullable(String), output Nullable(String),
    created_at DateTime64(3), updated_at DateTime64(3)
) ENGINE = MergeTree ORDER BY (project_id, id)
""")
s.query(f"""
INSERT INTO lf.traces SELECT * FROM file('{traces_jsonl}', 'JSONEachRow')
""")

observations = s.query("""
SELECT id, trace_id, project_id, environment, type, parent_observation_id,
       start_time, end_time, name, metadata, level, status_message, version,
       input, output, provided_model_name, model_parameters, usage_details,
       cost_details, completion_start_time, prompt_name, prompt_version,
       total_cost,
       if(isNull(end_time), NULL, date_diff('millisecond', start_time, end_time) / 1000) as latency,
       if(isNull(completion_start_time), NULL, date_diff('millisecond', start_time, completion_start_time) / 1000) as time_to_first_token,
       internal_model_id as model_id, created_at, updated_at, prompt_id,
       tool_calls, tool_call_names, tool_definitions, usage_pricing_tier_name
FROM lf.observations ORDER BY start_time
""", "Parquet")
traces = s.query("SELECT * FROM lf.traces ORDER BY timestamp", "Parquet")
for name, result in [("observations", observations), ("traces", traces)]:
    with open(os.path.join(here, f"blob_export_{name}.parquet"), "wb") as f:
        f.write(result.bytes())
print("chdb", chdb.__version__)
