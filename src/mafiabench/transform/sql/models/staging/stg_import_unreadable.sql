with source as (
    select * from {{ source('mafiabench', 'raw_import_unreadable') }}
),

landed as (
    select distinct source, source_file from {{ source('mafiabench', 'raw_games') }} where source_file is not null
),

final as (
    select
        s.source,
        s.path,
        s.file,
        s.reason,
        s.imported_at
    from source as s
    -- a game left out by one import and landed by another (from another path, or fixed since) is not left out
    anti join landed as l on l.source = s.source and l.source_file = s.file
)

select * from final
