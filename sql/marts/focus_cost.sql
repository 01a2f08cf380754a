-- The chargeback of [from_ts, to_ts) as a FOCUS 1.3 cost and usage dataset (FinOps Foundation's FOCUS: the
-- columns finance tools read, docs/focus.md): one row per project × GPU model × day (the charge period, the
-- day's part inside the window), for {project} ('' for every project).
-- The price is the cost model's, as chargeback.sql charges it: a GPU model's cost over the window (cost.sql's
-- total_cost: capex amortized over the capacity GPU-hours plus the energy of its node-hours × PUE × power
-- price) ÷ its allocated GPU-hours, so that whoever held the GPUs pays for the capacity, idle time included.
-- The site sells at that one rate, with no negotiated discount and no commitment, so FOCUS's four costs are
-- one figure:
--   ListUnitPrice = ContractedUnitPrice  cost.sql's cost_per_allocated_gpu_h of the model for the window (the
--                                        site publishes no other price list: its rate is its list price)
--   ListCost = ContractedCost = EffectiveCost = BilledCost   the day's allocated GPU-hours × that price
--                                        (FOCUS: a cost is its unit price × PricingQuantity)
-- so Σ BilledCost over the window = chargeback's cost, project by project (the law
-- sql/checks/focus_matches_chargeback.sql). The day's allocated GPU-hours are chargeback's, from the same
-- rows: run_allocation_daily.sql (run_node_hour's GPU time inside the window, a node with several models
-- split by gpu_model_share, by run and day), which chargeback sums over the window.
-- ConsumedQuantity = PricingQuantity = those GPU-hours ('GPU-Hours'). The x_ columns (FOCUS's custom
-- columns) hold what FOCUS has no column for: the busy GPU-hours (GPU time × the node's utilization in each
-- hour: run_allocation_daily's busy_gpu_s), the GPUs' energy (its energy_j), the cluster and model.
-- The provider, publisher, invoice issuer, host and billing account are the site, named by its cluster
-- (the warehouse knows no other name for it); a project is a FOCUS sub account.
--- [mart]
--- grain = "one row per project, GPU model and day"
--- scope = "project"
--- columns = ["AvailabilityZone", "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency", "ChargePeriodEnd", "ChargePeriodStart", "CommitmentDiscountCategory", "CommitmentDiscountId", "CommitmentDiscountName", "CommitmentDiscountStatus", "CommitmentDiscountType", "ConsumedQuantity", "ConsumedUnit", "ContractedCost", "ContractedUnitPrice", "EffectiveCost", "HostProviderName", "InvoiceIssuerName", "ListCost", "ListUnitPrice", "PricingCategory", "PricingQuantity", "PricingUnit", "ProviderName", "PublisherName", "RegionId", "RegionName", "ResourceId", "ResourceName", "ResourceType", "ServiceCategory", "ServiceName", "ServiceProviderName", "SkuId", "SkuPriceId", "SubAccountId", "SubAccountName", "Tags", "x_BusyGpuHours", "x_EnergyKwh", "x_Cluster", "x_GpuModel"]
WITH
-- each day's allocated GPU-hours as chargeback sums them over the window (run_allocation_daily.sql: the
-- allocation defined once)
day_alloc AS (
    SELECT day, project, gpu_model, sum(gpu_s) / 3600 AS gpu_h, sum(busy_gpu_s) / 3600 AS busy_gpu_h,
           sum(energy_j) / 3.6e6 AS energy_kwh
    FROM ({{mart run_allocation_daily}})
    GROUP BY day, project, gpu_model
),
-- each model's price per allocated GPU-hour for the window, as chargeback charges it
price AS (
    SELECT model AS gpu_model, total_cost / nullIf(allocated_gpu_h, 0) AS per_gpu_h, currency
    FROM ({{mart cost}})
    WHERE model != 'all'
),
priced AS (
    SELECT a.day AS day, a.project AS project, a.gpu_model AS gpu_model, a.gpu_h AS gpu_h,
           a.busy_gpu_h AS busy_gpu_h, a.energy_kwh AS energy_kwh, p.per_gpu_h AS per_gpu_h,
           a.gpu_h * p.per_gpu_h AS cost, p.currency AS currency
    FROM day_alloc AS a
    LEFT JOIN price AS p ON p.gpu_model = a.gpu_model
    WHERE a.gpu_h > 0
)
-- DateTime64: the engine hands a DateTime to Arrow as its seconds (UInt32), a DateTime64 as a timestamp
SELECT
    CAST(NULL AS Nullable(String)) AS AvailabilityZone,
    toDecimal128(ifNull(cost, 0), 10) AS BilledCost,
    {cluster:String} AS BillingAccountId,
    {cluster:String} AS BillingAccountName,
    -- a model without a cost model has no price: 0, in the currency of the priced models
    ifNull(currency, (SELECT any(currency) FROM price)) AS BillingCurrency,
    toDateTime64({to_ts:DateTime('UTC')}, 0, 'UTC') AS BillingPeriodEnd,
    toDateTime64({from_ts:DateTime('UTC')}, 0, 'UTC') AS BillingPeriodStart,
    'Usage' AS ChargeCategory,
    -- not a correction of a closed billing period: FOCUS's ChargeClass is null then
    CAST(NULL AS Nullable(String)) AS ChargeClass,
    concat('GPU-hours allocated to project ', project, ' on ', gpu_model, ' GPUs of ', {cluster:String})
        AS ChargeDescription,
    'Usage-Based' AS ChargeFrequency,
    toDateTime64(least(toDateTime(day + 1, 'UTC'), {to_ts:DateTime('UTC')}), 0, 'UTC') AS ChargePeriodEnd,
    toDateTime64(greatest(toDateTime(day, 'UTC'), {from_ts:DateTime('UTC')}), 0, 'UTC') AS ChargePeriodStart,
    CAST(NULL AS Nullable(String)) AS CommitmentDiscountCategory,
    CAST(NULL AS Nullable(String)) AS CommitmentDiscountId,
    CAST(NULL AS Nullable(String)) AS CommitmentDiscountName,
    CAST(NULL AS Nullable(String)) AS CommitmentDiscountStatus,
    CAST(NULL AS Nullable(String)) AS CommitmentDiscountType,
    toDecimal128(gpu_h, 10) AS ConsumedQuantity,
    'GPU-Hours' AS ConsumedUnit,
    BilledCost AS ContractedCost,
    toDecimal128(ifNull(per_gpu_h, 0), 10) AS ContractedUnitPrice,
    BilledCost AS EffectiveCost,
    {cluster:String} AS HostProviderName,
    {cluster:String} AS InvoiceIssuerName,
    BilledCost AS ListCost,
    ContractedUnitPrice AS ListUnitPrice,
    'Standard' AS PricingCategory,
    ConsumedQuantity AS PricingQuantity,
    'GPU-Hours' AS PricingUnit,
    {cluster:String} AS ProviderName,
    {cluster:String} AS PublisherName,
    CAST(NULL AS Nullable(String)) AS RegionId,
    CAST(NULL AS Nullable(String)) AS RegionName,
    concat({cluster:String}, '/gpu/', gpu_model) AS ResourceId,
    concat(gpu_model, ' GPUs of ', {cluster:String}) AS ResourceName,
    'GPU' AS ResourceType,
    'Compute' AS ServiceCategory,
    'GPU compute' AS ServiceName,
    {cluster:String} AS ServiceProviderName,
    concat('gpu-hour/', gpu_model) AS SkuId,
    concat({cluster:String}, '/gpu-hour/', gpu_model) AS SkuPriceId,
    project AS SubAccountId,
    project AS SubAccountName,
    toJSONString(map('project', project, 'gpu_model', gpu_model)) AS Tags,
    busy_gpu_h AS x_BusyGpuHours,
    energy_kwh AS x_EnergyKwh,
    {cluster:String} AS x_Cluster,
    gpu_model AS x_GpuModel
FROM priced
ORDER BY ChargePeriodStart, SubAccountId, x_GpuModel
SETTINGS join_use_nulls = 1;
