-- How Slurm's accounting database encodes a job, decoded the way sacct prints it, so that reading
-- slurmdbd's tables directly (etl/slurmdbd_source.py, sql/staging/slurmdbd_records.sql) gives the same
-- records as running sacct. Constants from Slurm's slurm.h (22.05).

-- Epoch seconds -> sacct's time text; 0 means not (yet) known.
CREATE OR REPLACE FUNCTION slurm_time_text {{on_cluster}} AS (epoch) ->
    if(epoch = 0, 'Unknown', formatDateTime(toDateTime(epoch, 'UTC'), '%Y-%m-%dT%H:%i:%S'));

-- A raw wait status -> "exit:signal" (a job killed by a signal has no exit code of its own). As sacct
-- does, an exit code of 128 or more (a shell reporting a child killed by signal N as 128+N) loses 128:
-- a batch script whose shell exited 143 prints as 15:0.
CREATE OR REPLACE FUNCTION slurm_exit_text {{on_cluster}} AS (status) ->
    if(bitAnd(status, 127) != 0, concat('0:', toString(bitAnd(status, 127))),
       concat(toString(if(bitAnd(bitShiftRight(status, 8), 255) >= 128, bitAnd(bitShiftRight(status, 8), 255) - 128,
                          bitAnd(bitShiftRight(status, 8), 255))), ':0'));

-- The state word: the base state in the low byte, JOB_REQUEUE (0x400) marks a run that was requeued;
-- a cancelled job names the uid that cancelled it (kill_requid; 4294967294/5 = not recorded).
CREATE OR REPLACE FUNCTION slurm_state_text {{on_cluster}} AS (state, kill_requid) ->
    multiIf(bitAnd(state, 1024) != 0, 'REQUEUED',
            bitAnd(state, 255) = 4 AND ifNull(kill_requid, 4294967294) < 4294967294,
                concat('CANCELLED by ', toString(kill_requid)),
            arrayElement(['PENDING', 'RUNNING', 'SUSPENDED', 'COMPLETED', 'CANCELLED', 'FAILED', 'TIMEOUT',
                          'NODE_FAIL', 'PREEMPTED', 'BOOT_FAIL', 'DEADLINE', 'OUT_OF_MEMORY'],
                         toUInt32(bitAnd(state, 255)) + 1));

-- Memory in MiB as sacct prints it in TRES strings: divided by 1024 only while exact (250000M, 1G), 0 bare.
CREATE OR REPLACE FUNCTION slurm_mem_text {{on_cluster}} AS (mib) ->
    multiIf(mib = 0, '0',
            mib % 1073741824 = 0, concat(toString(intDiv(mib, 1073741824)), 'P'),
            mib % 1048576 = 0, concat(toString(intDiv(mib, 1048576)), 'T'),
            mib % 1024 = 0, concat(toString(intDiv(mib, 1024)), 'G'),
            concat(toString(mib), 'M'));

-- A TRES id list ("1=16,2=64000,4=2,1001=16") -> sacct's text ("cpu=16,gres/gpu=16,mem=64000M,node=2"),
-- with names from tres_table (`names`: id -> "cpu", "gres/gpu:h100", ...), unset values (NO_VAL64) left
-- out, sorted as sacct sorts them.
CREATE OR REPLACE FUNCTION slurm_tres_text {{on_cluster}} AS (ids, names) ->
    arrayStringConcat(arraySort(arrayFilter(x -> x != '', arrayMap(kv -> if(
        length(kv) != 2 OR kv[2] = '18446744073709551614' OR names[toUInt64OrZero(kv[1])] = '', '',
        concat(names[toUInt64OrZero(kv[1])], '=',
               if(names[toUInt64OrZero(kv[1])] = 'mem', slurm_mem_text(toUInt64OrZero(kv[2])), kv[2]))),
        arrayMap(p -> splitByChar('=', p), splitByChar(',', ids))))), ',');

-- A step id -> its name in a JobID ("123.batch"): the special steps are negative in the database.
CREATE OR REPLACE FUNCTION slurm_step_text {{on_cluster}} AS (id) ->
    multiIf(id = -5, 'batch', id = -4, 'extern', id = -6, 'interactive', id = -2, 'pending', toString(id));

-- CPU seconds and microseconds (a step's user_sec + sys_sec, user_usec + sys_usec) -> sacct's TotalCPU
-- text (sacct/print.c _elapsed_time, 22.05): microseconds carried into seconds, milliseconds shown only
-- under an hour ("MM:SS.mmm", truncated), whole seconds from an hour up ("HH:MM:SS", "D-HH:MM:SS").
CREATE OR REPLACE FUNCTION slurm_cpu_text {{on_cluster}} AS (sec, usec) ->
    multiIf(sec + intDiv(usec, 1000000) >= 86400,
                concat(toString(intDiv(sec + intDiv(usec, 1000000), 86400)), '-',
                       leftPad(toString(intDiv(sec + intDiv(usec, 1000000), 3600) % 24), 2, '0'), ':',
                       leftPad(toString(intDiv(sec + intDiv(usec, 1000000), 60) % 60), 2, '0'), ':',
                       leftPad(toString((sec + intDiv(usec, 1000000)) % 60), 2, '0')),
            sec + intDiv(usec, 1000000) >= 3600,
                concat(leftPad(toString(intDiv(sec + intDiv(usec, 1000000), 3600) % 24), 2, '0'), ':',
                       leftPad(toString(intDiv(sec + intDiv(usec, 1000000), 60) % 60), 2, '0'), ':',
                       leftPad(toString((sec + intDiv(usec, 1000000)) % 60), 2, '0')),
            intDiv(usec % 1000000, 1000) > 0,
                concat(leftPad(toString(intDiv(sec + intDiv(usec, 1000000), 60) % 60), 2, '0'), ':',
                       leftPad(toString((sec + intDiv(usec, 1000000)) % 60), 2, '0'), '.',
                       leftPad(toString(intDiv(usec % 1000000, 1000)), 3, '0')),
            concat('00:', leftPad(toString(intDiv(sec + intDiv(usec, 1000000), 60) % 60), 2, '0'), ':',
                   leftPad(toString((sec + intDiv(usec, 1000000)) % 60), 2, '0')));

-- Bytes -> sacct's MaxRSS text (convert_num_unit with CONVERT_NUM_UNIT_EXACT): divided by 1024 while the
-- number is above 1024 and divides exactly (1872072704 -> 1828196K; 1000000 stays bare, sacct's bytes).
CREATE OR REPLACE FUNCTION slurm_bytes_text {{on_cluster}} AS (b) ->
    multiIf(b % 1125899906842624 = 0 AND intDiv(b, 1099511627776) > 1024, concat(toString(intDiv(b, 1125899906842624)), 'P'),
            b % 1099511627776 = 0 AND intDiv(b, 1073741824) > 1024, concat(toString(intDiv(b, 1099511627776)), 'T'),
            b % 1073741824 = 0 AND intDiv(b, 1048576) > 1024, concat(toString(intDiv(b, 1073741824)), 'G'),
            b % 1048576 = 0 AND intDiv(b, 1024) > 1024, concat(toString(intDiv(b, 1048576)), 'M'),
            b % 1024 = 0 AND b > 1024, concat(toString(intDiv(b, 1024)), 'K'),
            toString(b));
